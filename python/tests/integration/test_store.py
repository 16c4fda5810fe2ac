"""A broken store says what to do: the metastore gone while the warehouse
folder remains, or the other way round, is found before Spark fails deep inside a statement,
the message names `poisonwatch store rebuild`, and that command loses no landed data (raw
tables with their ledger, apply ledgers) and keeps the old halves.

Real subprocesses with their own Spark JVM on a store of the module's own (about 6 JVM starts).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.child_python import run_py

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"
GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"

LOAD = """
import json
from pathlib import Path
from poisonwatch.ingest import ingest
from poisonwatch.warehouse.engine import connect
with connect("local") as e:
    s = ingest(e, Path(LANDING))
    d = s.datasets["ssb_receive_attempts"]
    if WITH_OPS:
        from poisonwatch.remediation.ledger import ensure_ops_tables
        ensure_ops_tables(e)
        e.execute("insert into poisonwatch_ops.action_log values "
                  "('act-1', 'run-1', timestamp'2026-11-20 08:00:00', 'applied')")
        # A crashed run's row, removed as recovery removes it: on Delta its file stays in
        # the folder, and a rebuild must not bring the row back.
        e.execute("insert into poisonwatch_ops.action_log values "
                  "('act-2', 'run-2', timestamp'2026-11-20 08:01:00', 'applied')")
        e.execute("delete from poisonwatch_ops.action_log where run_id = 'run-2'")
    rows = e.scalar("select count(*) from raw.ssb_receive_attempts")
    has_ops = e.query("show databases like 'poisonwatch_ops'")[1]
    ops = e.scalar("select count(*) from poisonwatch_ops.action_log") if has_ops else None
print("@@" + json.dumps({"loaded": d.records_loaded, "skipped": d.files_skipped,
                         "rows": rows, "ops": ops}))
"""


def pw(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN), *args],
        env={**env, "COLUMNS": "200"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


def load(env: dict[str, str], landing: Path, with_ops: bool = False) -> dict[str, int | None]:
    code = f"LANDING = {str(landing)!r}\nWITH_OPS = {with_ops!r}\n" + LOAD
    return run_py(code, env)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    home = tmp_path_factory.mktemp("broken-store")
    return {
        **os.environ,
        "POISONWATCH_HOME": str(home / "store"),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": "1g",
    }


@pytest.fixture(scope="module")
def landing(env: dict[str, str]) -> Path:
    folder = Path(env["POISONWATCH_HOME"]).parent / "landing" / "ssb_receive_attempts"
    folder.mkdir(parents=True)
    records = [
        {
            "attempted_at": f"2026-11-20T08:0{i}:00Z",
            "server_name": "sql1",
            "database_name": "Orders",
            "queue_name": "OrderQueue",
            "conversation_handle": GUID,
            "message_sequence_number": i,
            "outcome": "committed",
        }
        for i in range(3)
    ]
    (folder / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return folder.parent


def test_metastore_gone_is_found_up_front_and_rebuild_keeps_the_data(
    env: dict[str, str], landing: Path
) -> None:
    store = Path(env["POISONWATCH_HOME"])
    assert load(env, landing, with_ops=True) == {"loaded": 3, "skipped": 0, "rows": 3, "ops": 1}

    shutil.rmtree(store / "metastore_db")
    broken = pw(env, "ingest", str(landing))
    assert broken.returncode != 0
    message = " ".join(broken.stderr.split())
    assert "metastore" in message and "poisonwatch store rebuild" in message, broken.stderr
    assert "LOCATION_ALREADY_EXISTS" in message  # named as what Spark would do, not raised
    assert "Traceback" not in broken.stderr

    rebuilt = pw(env, "store", "rebuild", "--no-build")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    out = " ".join((rebuilt.stdout + rebuilt.stderr).split())
    assert "restored raw.ssb_receive_attempts: 3 row(s)" in out, out
    assert "restored poisonwatch_ops.action_log: 1 row(s)" in out, out
    assert len(list(store.glob("warehouse.orphan-*"))) == 1  # kept, not deleted
    assert list(store.glob("warehouse.orphan-*/poisonwatch_ops.db/action_log/_delta_log"))
    # The ledger came back too: the landed file is known, nothing loads twice.
    assert load(env, landing) == {"loaded": 0, "skipped": 1, "rows": 3, "ops": 1}


def test_warehouse_gone_is_found_and_rebuild_then_ingest_recovers(
    env: dict[str, str], landing: Path
) -> None:
    store = Path(env["POISONWATCH_HOME"])
    shutil.rmtree(store / "warehouse")
    broken = pw(env, "sql", "select 1")
    assert broken.returncode != 0
    message = " ".join(broken.stderr.split())
    assert "are gone" in message and "poisonwatch store rebuild" in message, broken.stderr
    assert "poisonwatch ingest LANDING" in message

    rebuilt = pw(env, "store", "rebuild", "--no-build")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert len(list(store.glob("metastore_db.orphan-*"))) == 1
    assert load(env, landing) == {"loaded": 3, "skipped": 0, "rows": 3, "ops": None}


def test_store_locations_problem_tells_a_copy_from_a_lost_warehouse(tmp_path: Path) -> None:
    """The check on the metastore's database folders, on real folders: in this store's
    warehouse (through a symlink too) is fine; elsewhere, or gone with this warehouse holding
    the folder, is a copied or moved store; gone altogether is a lost warehouse."""
    from poisonwatch.config import REBUILD_COMMAND, store_locations_problem

    store, other = tmp_path / "store", tmp_path / "other"
    (store / "warehouse" / "raw.db").mkdir(parents=True)
    (other / "warehouse" / "raw.db").mkdir(parents=True)
    (tmp_path / "linked").symlink_to(store)

    def uri(folder: Path) -> str:
        return "file:" + str(folder).replace(" ", "%20")

    here = {"raw": uri(store / "warehouse" / "raw.db"), "default": uri(other)}
    assert store_locations_problem(store, here) is None
    assert store_locations_problem(tmp_path / "linked", here) is None
    # One database's folder linked onto another disk is still this store's.
    (store / "warehouse" / "ops.db").symlink_to(other / "warehouse" / "raw.db")
    linked_db = {"ops": uri(store / "warehouse" / "ops.db")}
    assert store_locations_problem(store, linked_db) is None

    copied = store_locations_problem(store, {"raw": uri(other / "warehouse" / "raw.db")})
    assert copied is not None and "copied or moved" in copied
    assert f"raw in {other / 'warehouse' / 'raw.db'}" in copied and REBUILD_COMMAND in copied

    moved = store_locations_problem(store, {"raw": uri(tmp_path / "gone" / "raw.db")})
    assert moved is not None and "copied or moved" in moved

    lost = store_locations_problem(store, {"lost": uri(tmp_path / "gone" / "lost.db")})
    assert lost is not None and "are gone" in lost and "copied" not in lost


def test_a_copied_store_is_refused_until_rebuilt(env: dict[str, str], landing: Path) -> None:
    """A store copied to another folder keeps the original's absolute folders in its
    metastore: it must not write there."""
    store = Path(env["POISONWATCH_HOME"])
    copy = store.parent / "copied store"  # a space: the metastore keeps it %-quoted
    shutil.copytree(store, copy, symlinks=True)
    original = sorted(str(p.relative_to(store)) for p in (store / "warehouse").rglob("*"))
    copy_env = {**env, "POISONWATCH_HOME": str(copy)}

    refused = pw(copy_env, "ingest", str(landing))
    assert refused.returncode != 0
    message = " ".join(refused.stderr.split())
    assert "copied or moved" in message and "poisonwatch store rebuild" in message, message
    assert str(store / "warehouse") in message and "Traceback" not in refused.stderr

    rebuilt = pw(copy_env, "store", "rebuild", "--no-build")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    out = " ".join((rebuilt.stdout + rebuilt.stderr).split())
    assert "restored raw.ssb_receive_attempts: 3 row(s)" in out, out

    # The restored tables are this store's files (rebuild counted them through the new
    # metastore, which knows only the copy's warehouse).
    assert list((copy / "warehouse" / "raw.db" / "ssb_receive_attempts").rglob("*.parquet"))
    # The original store was not written through the copy.
    assert sorted(str(p.relative_to(store)) for p in (store / "warehouse").rglob("*")) == original
