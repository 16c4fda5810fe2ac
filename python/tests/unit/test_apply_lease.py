"""The apply lease's process check (no Spark): a lease names its holder by boot, pid and the
pid's start ticks, so a local lease whose process is gone, whose pid now belongs to a process
started later (pid reuse after kill -9), or that was taken before a reboot is stale, and the
process that took it is not; no clock is compared. The lease itself, across processes and
skewed clocks, is tested on a real Thrift server in test_cluster_security.py."""

from __future__ import annotations

import datetime as dt
import os
import subprocess

import pytest

from poisonwatch.remediation.ledger import _holder_alive, process_identity, utcnow


def test_a_live_holder_keeps_its_lease() -> None:
    assert _holder_alive(process_identity())


def test_an_ended_or_reused_pid_does_not_keep_a_dead_applys_lease() -> None:
    newcomer = subprocess.Popen(["sleep", "30"])
    try:
        identity = process_identity(newcomer.pid)
        assert _holder_alive(identity)
        boot, pid, ticks = identity.rsplit(":", 2)
        # Same pid number as the lease row knows, but a process that started at another tick.
        assert not _holder_alive(f"{boot}:{pid}:{int(ticks) - 100}")
        # A lease taken before this machine last booted.
        assert not _holder_alive(f"another-boot:{pid}:{ticks}")
    finally:
        newcomer.kill()
        newcomer.wait()
    assert not _holder_alive(identity)


def test_an_unreadable_identity_is_trusted() -> None:
    assert _holder_alive("not an identity")
    assert _holder_alive(None)


def test_the_clock_hook_skews_this_clients_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POISONWATCH_TEST_CLOCK_OFFSET_SECONDS", "-3600")
    behind = utcnow()
    monkeypatch.delenv("POISONWATCH_TEST_CLOCK_OFFSET_SECONDS")
    assert dt.timedelta(minutes=59) < utcnow() - behind < dt.timedelta(minutes=61)
    assert os.environ.get("POISONWATCH_TEST_CLOCK_OFFSET_SECONDS") is None
