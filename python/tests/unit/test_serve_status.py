"""`poisonwatch serve`'s parts that need no Spark: how a command finds a running server (its
status file and the store's lock, held by a real second process), the write turn, the cycle's
line, the landing listing and `serve --status` without a server. The server itself runs in
e2e/test_serve.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from poisonwatch.serve.loop import CycleResult, landing_files, print_status
from poisonwatch.warehouse import server

HOLD_LOCK = """
import fcntl, sys, time
fh = open(sys.argv[1], "a+")
fcntl.flock(fh, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
"""


@pytest.fixture()
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "store"))
    (tmp_path / "store").mkdir()
    return tmp_path / "store"


def _status(store: Path, port: int = 12345, pid: int = 4242) -> None:
    server.write_status({"pid": pid, "host": "127.0.0.1", "port": port}, store)


def _gone_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_status_file_without_the_lock_held_is_stale(store: Path) -> None:
    assert server.running_server(store) is None
    _status(store)
    assert server.running_server(store) is None  # nobody holds .lock: a killed server's file


def test_a_server_holding_the_store_lock_is_found(store: Path) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store / ".lock")], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        _status(store, port=23456, pid=holder.pid)
        found = server.running_server(store)
        assert found is not None
        assert (found.host, found.port, found.pid) == ("127.0.0.1", 23456, holder.pid)
        # A killed server's file while a successor, still starting, holds the lock.
        _status(store, port=23457, pid=_gone_pid())
        assert server.running_server(store) is None
        (store / server.STATUS_FILE).write_text("{torn")
        assert server.running_server(store) is None
    finally:
        holder.kill()
        holder.wait()


def _free_in_another_process(path: Path) -> bool:
    probe = subprocess.run(
        [sys.executable, "-c",
         "import fcntl, sys; fh = open(sys.argv[1], 'a+'); "
         "fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)",
         str(path)],
        capture_output=True,
    )  # fmt: skip
    return probe.returncode == 0


def test_the_turn_is_reentrant_and_released(store: Path) -> None:
    with server.turn("outer"), server.turn("inner"):
        assert not _free_in_another_process(store / server.TURN_FILE)
    assert (store / server.TURN_FILE).read_text().strip() == "outer"
    assert _free_in_another_process(store / server.TURN_FILE)


def test_cycle_lines() -> None:
    assert CycleResult(3, seconds=0.01).line() == "cycle 3 · nothing new · 0.0 s"
    assert CycleResult(3).idle
    busy = CycleResult(7, files=1, attempts=100321, build_seconds=12.34, alerts_new=1,
                       alerts_resolved=2, seconds=20.0)  # fmt: skip
    assert busy.line() == (
        "cycle 7 · 1 file · 100,321 attempts · build 12.3 s · alerts +1 −2 · 20.0 s"
    )
    assert not busy.idle
    refused = CycleResult(9, files=2, attempts=5, build_seconds=1.0, error="webhook: 503",
                          seconds=2.0)  # fmt: skip
    assert refused.line() == (
        "cycle 9 · 2 files · 5 attempts · build 1.0 s · alerts +0 −0 · failed: webhook: 503 · 2.0 s"
    )
    failed = CycleResult(8, error="boom", seconds=1.0)
    assert failed.line() == "cycle 8 · failed: boom · 1.0 s" and not failed.idle


def test_landing_files_sees_a_changed_file(tmp_path: Path) -> None:
    (tmp_path / "ssb_receive_attempts").mkdir()
    path = tmp_path / "ssb_receive_attempts" / "a.jsonl"
    path.write_text("{}\n")
    first = landing_files(tmp_path)
    assert list(first) == ["ssb_receive_attempts/a.jsonl"]
    path.write_text("{}\n{}\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 1_000_000))
    assert landing_files(tmp_path) != first


def test_status_without_a_server(store: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert print_status("json") == 3
    assert json.loads(capsys.readouterr().out)["running"] is False
    assert print_status() == 3


def test_waiting_for_the_turn_ends_when_cancelled(store: Path) -> None:
    """The server's cycle waits for a command's turn; SIGTERM (the cancel event) ends the wait
    at once instead of after the command's step, and the turn is not taken."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(store / server.TURN_FILE)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        cancel = threading.Event()
        outcome: list[str] = []

        def cycle() -> None:
            try:
                with server.turn("serve", cancel):
                    outcome.append("took the turn")
            except server.TurnCancelledError:
                outcome.append("cancelled")

        waiting = threading.Thread(target=cycle)
        waiting.start()
        time.sleep(3 * server.TURN_POLL_S)
        assert waiting.is_alive() and outcome == []  # it waits while the command holds it
        cancel.set()
        waiting.join(timeout=5 * server.TURN_POLL_S)
        assert not waiting.is_alive() and outcome == ["cancelled"]
    finally:
        holder.kill()
        holder.wait()
    # Once the command is gone the turn is free, and a wait with a cancel event takes it.
    with server.turn("serve", threading.Event()):
        assert not _free_in_another_process(store / server.TURN_FILE)
