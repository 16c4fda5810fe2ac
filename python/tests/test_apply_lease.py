"""The apply lease's staleness check (no Spark): a local lease whose pid is gone, or whose pid
now belongs to a process started after the lease was taken (pid reuse after kill -9), is
stale; the process that took it is not."""

from __future__ import annotations

import datetime as dt
import os
import subprocess

from poisonwatch.remediation.ledger import _lease_holder_alive, utcnow


def test_a_live_holder_keeps_its_lease() -> None:
    assert _lease_holder_alive(os.getpid(), utcnow())


def test_a_reused_pid_does_not_keep_a_dead_applys_lease() -> None:
    leased_at = utcnow() - dt.timedelta(minutes=10)
    newcomer = subprocess.Popen(["sleep", "30"])
    try:
        # Same pid number as far as the lease row knows, but started after the lease.
        assert not _lease_holder_alive(newcomer.pid, leased_at)
        # Had it taken the lease after starting, it would hold it.
        assert _lease_holder_alive(newcomer.pid, utcnow())
    finally:
        newcomer.kill()
        newcomer.wait()
    assert not _lease_holder_alive(newcomer.pid, utcnow())


def test_a_lease_time_read_as_text_is_understood() -> None:
    """The cluster target's Thrift server returns the lease's timestamp as text."""
    leased_at = (utcnow() - dt.timedelta(minutes=10)).isoformat(sep=" ")
    newcomer = subprocess.Popen(["sleep", "30"])
    try:
        assert not _lease_holder_alive(newcomer.pid, leased_at)
        assert _lease_holder_alive(newcomer.pid, "not a time")  # unknown: trust the live pid
    finally:
        newcomer.kill()
        newcomer.wait()
