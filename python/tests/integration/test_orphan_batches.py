"""Nothing reads an orphan batch: dbt's source tests, source freshness and `poisonwatch check`'s
suites read only the batches the ingest ledger committed, as the staging views do.

An ingest killed with SIGKILL after writing its rows and before its ledger row
(POISONWATCH_CRASH_AT=ingest_before_ledger) leaves an orphan batch; it sorts after every committed
batch, so a test scoped to the batches after a bound would look at it. On a store of this
module's own:

1. a committed good batch (real `poisonwatch ingest`), with old queue snapshots;
2. a killed ingest whose orphan batch holds a record `check` rejects (delivery_count 0, which
   ingest accepts) and fresh snapshots, plus a row the source tests reject (an outcome outside
   the accepted values, which ingest itself would reject: written into the orphan partition) →
   every source test and the two raw suites over those tables pass (attempts, freshness; every
   suite reads through the same filter: unit/test_check_suites.py), and freshness still sees
   the old snapshots;
3. the next ingest drops the orphan and commits the same files, with the bad outcome written into
   its partition → the accepted_values source test and the raw attempts suite fail, freshness
   passes: the readers do see committed batches;
4. another killed ingest with clean data, the source tests scoped to the batches after the first
   committed one as a build of new input scopes them → the orphan sorts after that bound and is
   still not read; the committed batch with the defect is, and the test fails.

Real processes, real Spark, dbt and great-expectations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.child_python import ROOT, last_result, run_cli, with_tests_on_path

pytestmark = pytest.mark.slow

HANDLE = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
GROUP = "0E984725-C51C-4BF4-9960-E1C80E27ABA1"
OLD_DAY = "2026-03-01"
ACCEPTED = "test.poisonwatch.source_accepted_values_jms_jms_receive_attempts_outcome"

# What each child script starts with: dbt, `check` and a bad row written into a batch.
PRELUDE = """
import json
from pathlib import Path
from dbt.cli.main import dbtRunner
from poisonwatch.config import home, project_root
from poisonwatch.ingest import ingest
from poisonwatch.ingest.sql import sql_string
from poisonwatch.quality.checks import run_checks
from poisonwatch.warehouse.engine import connect

root, store = str(project_root()), home()
CHECKED = ("raw_jms_receive_attempts", "raw_freshness")

def dbt(*args):
    res = dbtRunner().invoke([
        *args, "--project-dir", root, "--profiles-dir", root, "--target", "local", "--quiet",
        "--target-path", str(store / "dbt_target"), "--log-path", str(store / "logs"),
    ])
    assert res.result is not None, res.exception
    return res.result.results

def source_tests():
    results = dbt("test", "--select", "source:jms", "source:service_broker")
    return {
        r.node.unique_id: {"status": str(r.status), "sql": r.node.compiled_code}
        for r in results
        if r.node.unique_id.startswith("test.")
    }

def freshness():
    results = dbt("source", "freshness", "--select", "source:service_broker.ssb_queue_snapshots")
    return [str(r.status) for r in results if r.node.unique_id.startswith("source.")]

def checks(e):
    # The suites over the tables that hold a defect: the others would pass with or without
    # the committed-batch filter, which every suite gets from the same function.
    suites = [s for name in CHECKED for s in run_checks(e, name).suites]
    return {
        s.name: {"status": s.status, "failed": sorted(f.columns for f in s.failures())}
        for s in suites
    }

def batches(e):
    _, committed = e.query("select distinct _batch_id from raw.ingested_files")
    _, landed = e.query("select distinct _batch_id from raw.jms_receive_attempts")
    committed = sorted(str(r[0]) for r in committed)
    return committed, sorted(str(r[0]) for r in landed if str(r[0]) not in committed)

def bad_outcome(e, batch):
    # An outcome ingest would reject, written into the batch's partition as a writer that
    # skips the landing contract would: only the source tests can catch it.
    e.execute(
        f"insert into raw.jms_receive_attempts partition (_batch_id = {sql_string(batch)}) "
        "(attempted_at, broker_name, address, queue_name, message_id, consumer_id, "
        "server_name, delivery_count, outcome) values (timestamp'2026-03-01 00:30:00', "
        "'artemis-orphan', 'orders', 'orders', 'ID:bad', 'agent.orders', 'APP01', 1, "
        "'Rolled_Forward')"
    )
"""

# Step 2 on the orphan, then step 3: the next ingest commits the same files.
ORPHAN_SCRIPT = (
    PRELUDE
    + """
out = {}
with connect("local") as e:
    committed, (orphan,) = batches(e)
    out["committed"], out["orphan"] = committed, orphan
    bad_outcome(e, orphan)
    out["orphan_tests"] = source_tests()
    out["orphan_freshness"] = freshness()
    out["orphan_checks"] = checks(e)
    summary = ingest(e, Path(LANDING))
    out["cleaned"], out["recommitted"] = summary.cleaned_batches, summary.batch_id
    bad_outcome(e, summary.batch_id)
    out["committed_tests"] = source_tests()
    out["committed_freshness"] = freshness()
    out["committed_checks"] = checks(e)
print("@@" + json.dumps(out))
"""
)

# Step 4: an orphan batch that sorts after the committed batch holding the defect.
LATEST_SCRIPT = (
    PRELUDE
    + """
import os
out = {}
with connect("local") as e:
    out["committed"], (out["orphan"],) = batches(e)
    # As a build of new input scopes them: the batches after the first committed one, which
    # the orphan sorts after too.
    os.environ["POISONWATCH_BATCHES_SINCE"] = out["committed"][0]
    out["tests"] = source_tests()
print("@@" + json.dumps(out))
"""
)


def _run_script(code: str, env: dict[str, str], folder: Path) -> Any:
    """Run `code` from a file in a child process and return what it printed after "@@".
    From a file, not `python -c`: great-expectations' import of pyspark ends a `-c` process
    (a doctest runner of pyspark's exits it) before the script has run."""
    script = folder / "script.py"
    script.write_text(code)
    proc = subprocess.run(
        [sys.executable, str(script)],
        env=with_tests_on_path(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    result = last_result(proc.stdout)
    assert result is not None, proc.stdout[-3000:] + proc.stderr[-5000:]
    return result


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _ssb_attempt(seq: int, outcome: str = "rolled_back") -> dict[str, Any]:
    row: dict[str, Any] = {
        "attempted_at": f"{OLD_DAY}T00:0{seq}:00Z",
        "server_name": "SQLORPHAN",
        "database_name": "Orders",
        "queue_name": "OrderQueue",
        "conversation_group_id": GROUP,
        "conversation_handle": HANDLE,
        "message_sequence_number": 1,
        "outcome": outcome,
        "attempt_id": f"ORPHAN{seq:04d}",
    }
    if outcome == "rolled_back":
        row["error_number"] = 1205
    return row


def _jms_attempt(seq: int, delivery_count: int, message_id: str = "ID:orphan-1") -> dict[str, Any]:
    return {
        "attempted_at": f"{OLD_DAY}T00:1{seq}:00Z",
        "broker_name": "artemis-orphan",
        "address": "orders",
        "queue_name": "orders",
        "message_id": message_id,
        "consumer_id": "agent.orders",
        "server_name": "APP01",
        "delivery_count": delivery_count,
        "redelivered": delivery_count > 1,
        "outcome": "rolled_back",
        "exception_class": "java.net.ConnectException",
    }


def _ssb_snapshot(at: str) -> dict[str, Any]:
    return {
        "snapshot_at": at,
        "server_name": "SQLORPHAN",
        "database_name": "Orders",
        "queue_name": "OrderQueue",
        "status": 1,
        "priority": 5,
        "queuing_order": 1,
        "conversation_group_id": GROUP,
        "conversation_handle": HANDLE,
        "message_sequence_number": 1,
        "message_type_name": "//Orders/Submit",
        "validation": "X",
        "message_body": "PABhAC8APgA=",
        "message_enqueue_time": f"{OLD_DAY}T00:00:00Z",
    }


def _jms_snapshot(at: str) -> dict[str, Any]:
    return {
        "snapshot_at": at,
        "broker_name": "artemis-orphan",
        "address": "orders",
        "queue_name": "orders",
        "message_id": "ID:orphan-1",
        "enqueued_at": f"{OLD_DAY}T00:00:00Z",
        "delivery_count": 0,
        "priority": 4,
        "message_type": "Order",
        "body": "{}",
        "properties": "{}",
    }


def _write(landing: Path, dataset: str, name: str, rows: list[dict[str, Any]]) -> None:
    (landing / dataset).mkdir(exist_ok=True)
    (landing / dataset / name).write_text(_jsonl(rows))


def _ingest(landing: Path, env: dict[str, str], crash: bool) -> None:
    """`poisonwatch ingest` as a user runs it; with `crash`, killed before its ledger row."""
    run_cli(["ingest", str(landing)], env, "ingest_before_ledger" if crash else None)


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("orphan-store")
    landing = tmp_path_factory.mktemp("orphan-landing")
    env = {**os.environ, "POISONWATCH_HOME": str(store), "POISONWATCH_TARGET": "local"}
    old = f"{OLD_DAY}T01:00:00Z"
    fresh = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    # 1. The committed good batch: attempts and snapshots of one old day.
    _write(landing, "ssb_receive_attempts", "a.jsonl", [_ssb_attempt(1), _ssb_attempt(2)])
    _write(landing, "jms_receive_attempts", "b.jsonl", [_jms_attempt(1, 1), _jms_attempt(2, 2)])
    _write(landing, "ssb_queue_snapshots", "s.jsonl", [_ssb_snapshot(old)])
    _write(landing, "jms_queue_snapshots", "q.jsonl", [_jms_snapshot(old)])
    _ingest(landing, env, crash=False)
    # 2. The killed ingest: a delivery_count of 0 (check's defect) and fresh snapshots.
    _write(landing, "jms_receive_attempts", "c.jsonl", [_jms_attempt(3, 0, "ID:orphan-2")])
    _write(landing, "ssb_queue_snapshots", "t.jsonl", [_ssb_snapshot(fresh)])
    _ingest(landing, env, crash=True)
    scripts = tmp_path_factory.mktemp("orphan-scripts")
    result = _run_script(f"LANDING = {str(landing)!r}\n" + ORPHAN_SCRIPT, env, scripts)
    # 4. Another killed ingest, of clean attempts only.
    _write(landing, "jms_receive_attempts", "d.jsonl", [_jms_attempt(4, 3, "ID:orphan-3")])
    _ingest(landing, env, crash=True)
    result["latest"] = _run_script(LATEST_SCRIPT, env, scripts)
    return result


def _statuses(tests: dict[str, Any]) -> dict[str, list[str]]:
    by_status: dict[str, list[str]] = {}
    for unique_id, test in tests.items():
        by_status.setdefault(test["status"], []).append(unique_id)
    return by_status


def _accepted(tests: dict[str, Any]) -> dict[str, Any]:
    (test,) = [t for u, t in tests.items() if u.startswith(ACCEPTED)]
    return test


def test_source_tests_pass_when_the_defect_is_in_an_orphan_batch(found: dict[str, Any]) -> None:
    assert len(found["committed"]) == 1 and found["orphan"] > found["committed"][0]
    statuses = _statuses(found["orphan_tests"])
    assert set(statuses) == {"pass"}, statuses
    # Scoped to the batches the ledger committed (a semi-join on the partition column).
    sql = _accepted(found["orphan_tests"])["sql"]
    assert "_batch_id in ( select committed._batch_id" in " ".join(sql.split()), sql
    assert found["orphan"] not in sql


def test_check_passes_when_the_defect_is_in_an_orphan_batch(found: dict[str, Any]) -> None:
    suites = found["orphan_checks"]
    assert {name: s["status"] for name, s in suites.items()} == {
        name: "passed" for name in suites
    }, suites
    assert set(suites) == {"raw_jms_receive_attempts", "raw_freshness"}


def test_freshness_reads_committed_batches_only(found: dict[str, Any]) -> None:
    # The orphan's fresh snapshot does not make the old committed ones look fresh...
    assert found["orphan_freshness"] == ["error"]
    # ...and once the same snapshot is committed, the source is fresh.
    assert found["committed_freshness"] == ["pass"]


def test_a_committed_defect_fails_the_source_test_and_check(found: dict[str, Any]) -> None:
    assert found["cleaned"] == [found["orphan"]]
    statuses = _statuses(found["committed_tests"])
    assert len(statuses.get("fail", [])) == 1 and statuses["fail"][0].startswith(ACCEPTED), statuses
    sql = _accepted(found["committed_tests"])["sql"]
    assert "_batch_id in ( select committed._batch_id" in " ".join(sql.split()), sql
    suites = found["committed_checks"]
    failed = {n: s["failed"] for n, s in suites.items() if s["status"] != "passed"}
    assert failed == {
        "raw_jms_receive_attempts": ["delivery_count", "outcome"],
        # The fresh snapshot, committed now, is days after the newest attempt.
        "raw_freshness": ["snapshot_gap_days"],
    }, suites


def test_an_orphan_batch_after_the_bound_is_not_read(
    found: dict[str, Any],
) -> None:
    latest = found["latest"]
    assert latest["committed"][-1] == found["recommitted"] < latest["orphan"]
    test = _accepted(latest["tests"])
    assert test["status"] == "fail", test
    assert f"_batch_id > '{latest['committed'][0]}'" in test["sql"], test["sql"]
    assert latest["orphan"] not in test["sql"], test["sql"]
