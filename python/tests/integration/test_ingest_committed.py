"""dbt reads only what a committed ingest wrote (README "Landing contract").

An ingest writes its raw rows and rejects under its batch, then appends the ledger
(`raw.ingested_files`) last. Here a real `poisonwatch ingest` is killed with SIGKILL after its
rows are written and before the ledger (POISONWATCH_CRASH_AT=ingest_before_ledger); a dbt run
of the staging views and the incremental int_receive_attempts_sequenced must then see none of
the orphan batch, and after the next ingest (which drops the orphan and loads the same files
again under a new batch) and another run, the counts are those of one clean load. Real
processes, real Spark and dbt on a store of this module's own.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from support.child_python import run_cli, run_py

pytestmark = pytest.mark.slow

GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"

SCRIPT = """
import json
from pathlib import Path
from poisonwatch.ingest import ingest
from poisonwatch.warehouse.dbtrun import run_dbt
from poisonwatch.warehouse.engine import connect

COUNTS = {
    "raw_ssb": "select count(*) from raw.ssb_receive_attempts",
    "raw_jms": "select count(*) from raw.jms_receive_attempts",
    "raw_rejects": "select count(*) from raw.raw_rejects",
    "ledger": "select count(*) from raw.ingested_files",
    "stg_ssb": "select count(*) from poisonwatch_staging.stg_service_broker__receive_attempts",
    "stg_jms": "select count(*) from poisonwatch_staging.stg_jms__receive_attempts",
    "stg_rejects": "select count(*) from poisonwatch_staging.stg_ingest__rejects",
    "sequenced": "select count(*) from poisonwatch_intermediate.int_receive_attempts_sequenced",
}
SELECT = ["+int_receive_attempts_sequenced", "stg_ingest__rejects"]

def counts(e):
    return {k: int(e.query(sql)[1][0][0]) for k, sql in COUNTS.items()}

out = {}
with connect("local") as e:
    out["raw_after_kill"] = {k: int(e.query(COUNTS[k])[1][0][0]) for k in list(COUNTS)[:4]}
    run_dbt(["seed", "--select", "error_classes"])
    run_dbt(["run", "--select", *SELECT])
    out["after_kill"] = counts(e)
    summary = ingest(e, Path(LANDING))
    out["cleaned"] = summary.cleaned_batches
    out["batch"] = summary.batch_id
    run_dbt(["run", "--select", *SELECT])
    out["after_reingest"] = counts(e)
print("@@" + json.dumps(out))
"""


def _attempt(seq: int, outcome: str = "rolled_back") -> str:
    return json.dumps(
        {
            "attempted_at": f"2026-03-01T00:0{seq}:00Z",
            "server_name": "SQLKILL",
            "database_name": "Orders",
            "queue_name": "OrderQueue",
            "conversation_handle": GUID,
            "message_sequence_number": 1,
            "outcome": outcome,
            "error_number": 1205,
            "attempt_id": f"KILL{seq:04d}",
        }
    )


def _jms(seq: int) -> str:
    return json.dumps(
        {
            "attempted_at": f"2026-03-01T00:0{seq}:00Z",
            "broker_name": "artemis-kill",
            "address": "kill",
            "queue_name": "kill.work",
            "message_id": "ID:kill-1",
            "consumer_id": "agent.kill",
            "server_name": "S1",
            "delivery_count": seq,
            "outcome": "rolled_back",
            "exception_class": "java.lang.IllegalStateException",
        }
    )


@pytest.fixture(scope="module")
def found(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = tmp_path_factory.mktemp("committed-store")
    landing = tmp_path_factory.mktemp("committed-landing")
    (landing / "ssb_receive_attempts").mkdir()
    (landing / "ssb_receive_attempts" / "a.jsonl").write_text(
        "".join(_attempt(i) + "\n" for i in range(1, 5)) + _attempt(5, "bad") + "\n"
    )
    (landing / "jms_receive_attempts").mkdir()
    (landing / "jms_receive_attempts" / "b.jsonl").write_text(
        "".join(_jms(i) + "\n" for i in range(1, 4))
    )
    env = {**os.environ, "POISONWATCH_HOME": str(store), "POISONWATCH_TARGET": "local"}
    run_cli(["ingest", str(landing)], env, "ingest_before_ledger")
    result = run_py(f"LANDING = {str(landing)!r}\n" + SCRIPT, env)
    assert result is not None
    return result


def test_the_killed_run_left_rows_and_no_ledger(found: dict[str, Any]) -> None:
    """The precondition: the orphan batch is in the raw tables, uncommitted."""
    assert found["raw_after_kill"] == {"raw_ssb": 4, "raw_jms": 3, "raw_rejects": 1, "ledger": 0}


def test_a_build_after_a_killed_ingest_reads_nothing_of_its_batch(found: dict[str, Any]) -> None:
    after = found["after_kill"]
    assert after["raw_ssb"] == 4  # still there: only the next ingest drops it
    assert {k: v for k, v in after.items() if not k.startswith(("raw_", "ledger"))} == {
        "stg_ssb": 0,
        "stg_jms": 0,
        "stg_rejects": 0,
        "sequenced": 0,
    }


def test_the_next_ingest_and_build_count_each_record_once(found: dict[str, Any]) -> None:
    assert len(found["cleaned"]) == 1 and found["batch"] > found["cleaned"][0]
    assert found["after_reingest"] == {
        "raw_ssb": 4,
        "raw_jms": 3,
        "raw_rejects": 1,
        "ledger": 2,
        "stg_ssb": 4,
        "stg_jms": 3,
        "stg_rejects": 1,
        "sequenced": 7,
    }
