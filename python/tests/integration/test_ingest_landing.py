"""What ingest trusts in a landing folder, and one ingest at a time (README "Landing contract").

- Links: a file, subfolder or dataset folder that is a symbolic link is a reject naming the
  reason, and its target is never read (inside the landing folder too: links are not followed).
  A file that is not a regular file (a pipe) is a reject, never opened.
- The bytes loaded are the bytes hashed: a file appended to, or replaced, between the hash and
  Spark's read loads as it was hashed (Spark reads a copy made while hashing).
- The ingest lock: a real ingest paused while it holds the lock, and a second real process
  asking for the same lock, which is refused with the first one's pid.

Real Spark in this process on a store of this module's own; the lock test starts real processes
on a second store.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support.child_python import ROOT
from support.store import module_store

from poisonwatch import ingest
from poisonwatch.ingest.files import scan_landing
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import Engine

GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
BIN = Path(sys.executable).parent / "poisonwatch"


# One store and one Spark session for the module.
store, engine = module_store("landing")


def attempt(server: str, seq: int, queue: str = "OrderQueue") -> str:
    return json.dumps(
        {
            "attempted_at": f"2026-04-01T10:00:{seq:02d}Z",
            "server_name": server,
            "database_name": "Orders",
            "queue_name": queue,
            "conversation_handle": GUID,
            "message_sequence_number": seq,
            "outcome": "committed",
        }
    )


def lines(server: str, seqs: range, queue: str = "OrderQueue") -> str:
    return "".join(attempt(server, i, queue) + "\n" for i in seqs)


def rows(engine: Engine, sql: str) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in engine.query(sql)[1]]


def under(root: Path) -> str:
    return sql_string(str(root.resolve()) + "/%")


def rejects_of(engine: Engine, root: Path) -> dict[str, str]:
    """{path relative to root: reason} of the file-level rejects of files under root."""
    found = rows(
        engine,
        "select source_file, reason from raw.raw_rejects "
        f"where record_number is null and source_file like {under(root)}",
    )
    return {str(Path(f).relative_to(root.resolve())): r for f, r in found}


def test_links_and_pipes_are_rejected_with_a_reason_and_never_read(
    engine: Engine, tmp_path: Path
) -> None:
    landing, outside = tmp_path / "landing", tmp_path / "outside"
    ssb = landing / "ssb_receive_attempts"
    ssb.mkdir(parents=True)
    (ssb / "ok.jsonl").write_text(lines("SQLLINK", range(1, 3)))
    secret = outside / "secret.jsonl"
    (outside / "dir").mkdir(parents=True)
    secret.write_text(lines("SQLLINK", range(10, 13), queue="Outside"))
    (outside / "dir" / "more.jsonl").write_text(lines("SQLLINK", range(20, 22), queue="Outside"))
    (outside / "ssb_queue_states").mkdir()
    (outside / "ssb_queue_states" / "s.jsonl").write_text("{}\n")
    (ssb / "out.jsonl").symlink_to(secret)
    (ssb / "in.jsonl").symlink_to(ssb / "ok.jsonl")
    (ssb / "sub").symlink_to(outside / "dir")
    (landing / "ssb_queue_states").symlink_to(outside / "ssb_queue_states")
    os.mkfifo(ssb / "pipe.jsonl")

    # The scan already knows: nothing of these is opened (a pipe would block the hash).
    problems = {str(f.path.relative_to(landing)): f.problem for f in scan_landing(landing).files}
    assert problems["ssb_receive_attempts/ok.jsonl"] is None
    assert "not a regular file" in str(problems["ssb_receive_attempts/pipe.jsonl"])

    summary = ingest.ingest(engine, landing)
    ingest.print_summary(summary)
    assert summary.datasets["ssb_receive_attempts"].records_loaded == 2
    reasons = rejects_of(engine, landing)
    assert reasons == {
        "ssb_receive_attempts/out.jsonl": "symbolic link to outside the landing folder: not read",
        "ssb_receive_attempts/in.jsonl": (
            "symbolic link (to ssb_receive_attempts/ok.jsonl, inside the landing folder): "
            "links are not followed, land the file itself"
        ),
        "ssb_receive_attempts/sub": "symbolic link to outside the landing folder: not read",
        "ssb_queue_states": (
            "dataset folder is a symbolic link to outside the landing folder: not read"
        ),
        "ssb_receive_attempts/pipe.jsonl": (
            "not a regular file (a pipe, socket or device): not read"
        ),
    }
    queues = rows(
        engine,
        "select distinct queue_name from raw.ssb_receive_attempts where server_name = 'SQLLINK'",
    )
    assert queues == [("OrderQueue",)]
    assert rows(engine, "select count(*) from raw.ssb_queue_states") == [(0,)]
    # The ledger keys the links by their path: the target's bytes were never hashed.
    hashes = {r[0] for r in rows(engine, "select content_hash from raw.ingested_files")}
    assert hashlib.sha256(secret.read_bytes()).hexdigest() not in hashes

    again = ingest.ingest(engine, landing)  # rejected once, then skipped
    assert again.rejected_total == 0
    assert again.datasets["ssb_receive_attempts"].files_skipped == 5
    assert again.datasets["ssb_queue_states"].files_skipped == 1


def _copies_left(engine: Engine) -> list[str]:
    place = ingest.loader.ingest_place(engine)
    return sorted(p.name for p in (place / ingest.loader.COPIES_FOLDER).glob("*"))


def test_a_file_changed_between_hash_and_read_loads_as_hashed(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ssb = tmp_path / "ssb_receive_attempts"
    ssb.mkdir()
    growing, replaced = ssb / "growing.jsonl", ssb / "replaced.jsonl"
    growing.write_text(lines("SQLGROW", range(1, 4)))
    replaced.write_text(lines("SQLGROW", range(10, 12), queue="Before"))
    hashed = {p.name: hashlib.sha256(p.read_bytes()).digest().hex() for p in (growing, replaced)}
    real_prepare = ingest.loader.prepare

    def prepare_then_change(*args: Any, **kwargs: Any) -> None:
        """The files change right after they were hashed, before Spark reads them."""
        real_prepare(*args, **kwargs)
        with open(growing, "a") as fh:
            fh.write(lines("SQLGROW", range(4, 6)))
        new = ssb / ".replacement"
        new.write_text(lines("SQLGROW", range(20, 24), queue="After"))
        new.replace(replaced)

    monkeypatch.setattr(ingest.loader, "prepare", prepare_then_change)
    ingest.ingest(engine, tmp_path)
    monkeypatch.undo()
    by_file = rows(
        engine,
        "select element_at(split(_source_file, '/'), -1), queue_name, count(*) "
        "from raw.ssb_receive_attempts where server_name = 'SQLGROW' group by 1, 2 order by 1",
    )
    assert by_file == [("growing.jsonl", "OrderQueue", 3), ("replaced.jsonl", "Before", 2)]
    ledger = rows(
        engine,
        "select element_at(split(source_file, '/'), -1), content_hash from raw.ingested_files "
        f"where source_file like {under(tmp_path)} order by 1",
    )
    assert dict(ledger) == hashed
    assert _copies_left(engine) == []

    # The files as they are now load next time: the appended records, and the new content.
    later = ingest.ingest(engine, tmp_path)
    assert later.datasets["ssb_receive_attempts"].records_loaded == 2 + 4
    by_file = rows(
        engine,
        "select queue_name, count(*) from raw.ssb_receive_attempts "
        "where server_name = 'SQLGROW' group by 1 order by 1",
    )
    assert by_file == [("After", 4), ("Before", 2), ("OrderQueue", 5)]


def test_a_file_rewritten_with_the_same_path_and_size_loads_its_new_content(
    engine: Engine, tmp_path: Path
) -> None:
    """A file with the path and size of a loaded one is hashed without a copy first; its new
    content is then read again into a copy, and that is what loads."""
    path = tmp_path / "ssb_receive_attempts" / "same.jsonl"
    path.parent.mkdir()
    path.write_text(lines("SQLSAME", range(1, 3), queue="QA"))
    ingest.ingest(engine, tmp_path)
    path.write_text(lines("SQLSAME", range(1, 3), queue="QB"))
    summary = ingest.ingest(engine, tmp_path)
    assert summary.datasets["ssb_receive_attempts"].records_loaded == 2
    queues = rows(
        engine,
        "select queue_name, count(*) from raw.ssb_receive_attempts "
        "where server_name = 'SQLSAME' group by 1 order by 1",
    )
    assert queues == [("QA", 2), ("QB", 2)]


LOCK_SCRIPT = """
import sys
from pathlib import Path
from poisonwatch.ingest.loader import IngestBusyError, ingest_lock
try:
    with ingest_lock(Path(sys.argv[1])):
        print("taken")
except IngestBusyError as exc:
    print("refused:", exc)
"""


def _take_lock(place: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", LOCK_SCRIPT, str(place)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_second_ingest_is_refused_while_one_holds_the_lock(tmp_path: Path) -> None:
    """A real `poisonwatch ingest`, paused right after it took the lock, on a store of its own;
    a second process asks for the same lock (the raw database's folder of that store, what every
    ingest on the store takes, on the cluster target too) and is refused with the first one's
    pid; once the first has died, the lock is free (a lock of the kernel's, not a file left)."""
    home, landing = tmp_path / "home", tmp_path / "landing"
    (landing / "ssb_receive_attempts").mkdir(parents=True)
    (landing / "ssb_receive_attempts" / "a.jsonl").write_text(lines("SQLLOCK", range(1, 2)))
    pause = tmp_path / "paused"
    env = {**os.environ, "POISONWATCH_HOME": str(home), "POISONWATCH_TARGET": "local"}
    env.pop("POISONWATCH_CRASH_AT", None)
    first = subprocess.Popen(
        [str(BIN), "ingest", str(landing)],
        env={
            **env,
            "POISONWATCH_PAUSE_AT": "ingest_locked",
            "POISONWATCH_PAUSE_FILE": str(pause),
            "POISONWATCH_PAUSE_SECONDS": "300",
        },
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not pause.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert pause.exists(), first.communicate(timeout=30)[0]
        place = home / "warehouse" / "raw.db"
        assert (place / ingest.loader.LOCK_FILE).exists()
        env.pop("POISONWATCH_PAUSE_AT", None)
        answer = _take_lock(place, env)
        assert answer.startswith("refused: another ingest is running on this store")
        assert f"`poisonwatch ingest` pid {first.pid} on " in answer
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    assert _take_lock(place, env) == "taken"
