"""The gaps-and-islands models, int_service_broker__queue_rollback_runs and
int_jms__consumer_failure_runs, rewrite only the hours that hold new attempts, and the next ones
while a run may go on past them (macros/incremental/rewrite_segments.sql), continuing each queue's
or consumer's run from the state carried into the rewritten hours. The generated workload of
test_incremental.py seldom has a run open across an hour's edge where its late files land, so
this module lands hand-written attempts that do: runs of failures crossing hours, a late
failure in the middle of history, a new hour at the end, and a second server whose runs are
carried without a new attempt of its own, once from a row of the other segment of the same
run. Real ingest, dbt and Spark on the store these tests share (conftest.py). Checked: the runs
after the incremental run, attempt by attempt, against the values the rules give and against a
full refresh; and that hours outside the segments kept their files."""

from __future__ import annotations

from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import uuid
from pathlib import Path
from poisonwatch.ingest import ingest
from poisonwatch.warehouse.dbtrun import run_dbt
from poisonwatch.warehouse.engine import connect

DAY = "2026-03-01"
E1, E2, E3 = "java.lang.IllegalStateException", "java.net.ConnectException", "E3Exception"
# JMS: consumer agent.fuse on two servers; (server, hh:mm, outcome, exception class, late).
JMS = [
    ("S1", "00:01", "rolled_back", E1, False),
    ("S1", "00:02", "rolled_back", E1, False),
    ("S2", "00:03", "rolled_back", E1, False),
    ("S1", "01:06", "rolled_back", E1, False),
    ("S1", "01:07", "acknowledged", None, False),
    ("S1", "01:08", "rolled_back", E2, True),
    ("S1", "02:11", "rolled_back", E2, False),
    ("S2", "02:12", "rolled_back", E1, False),
    ("S1", "03:16", "rolled_back", E2, False),
    ("S1", "04:21", "acknowledged", None, False),
    ("S1", "05:26", "rolled_back", E3, False),
    ("S1", "06:31", "rolled_back", E3, True),
    ("S2", "06:40", "rolled_back", E1, False),
]
# Service Broker: one queue; (hh:mm, outcome, late).
SSB = [
    ("00:01", "rolled_back", False),
    ("00:02", "rolled_back", False),
    ("01:06", "rolled_back", False),
    ("01:07", "committed", False),
    ("01:08", "rolled_back", True),
    ("02:11", "rolled_back", False),
    ("03:16", "committed", False),
    ("05:26", "rolled_back", False),
    ("06:31", "rolled_back", True),
]

def at(hhmm):
    return f"{DAY}T{hhmm}:00.000000Z"

def jms_record(i, server, hhmm, outcome, exception):
    return {
        "attempted_at": at(hhmm), "broker_name": "artemis-fuse", "address": "fuse",
        "queue_name": "fuse.work", "message_id": f"ID:fuse-{i}", "correlation_id": None,
        "group_id": None, "delivery_count": 1, "redelivered": False, "orig_address": None,
        "orig_queue": None, "message_type": "com.example.Fuse", "consumer_id": "agent.fuse",
        "server_name": server, "activation_id": str(uuid.UUID(int=i + 1)), "outcome": outcome,
        "exception_class": exception,
        "exception_message": None if exception is None else "it failed ';--",
        "stack_trace": None,
    }

def ssb_record(i, hhmm, outcome):
    return {
        "attempted_at": at(hhmm), "server_name": "SQLFUSE", "database_name": "Fuse",
        "queue_name": "FuseQueue", "conversation_group_id": str(uuid.UUID(int=1000 + i)).upper(),
        "conversation_handle": str(uuid.UUID(int=2000 + i)).upper(),
        "message_sequence_number": 0, "message_type_name": "//fuse/Work", "outcome": outcome,
        "error_number": None if outcome == "committed" else 1205,
        "error_message": None if outcome == "committed" else "deadlock",
        "reader": "dbo.Fuse:spid51", "attempt_id": f"FUSE{i:08d}",
    }

def land(folder, late):
    for dataset, records in (
        ("jms_receive_attempts",
         [jms_record(i, *row[:4]) for i, row in enumerate(JMS) if row[4] == late]),
        ("ssb_receive_attempts",
         [ssb_record(i, *row[:2]) for i, row in enumerate(SSB) if row[2] == late]),
    ):
        (folder / dataset).mkdir(parents=True, exist_ok=True)
        lines = "".join(json.dumps(r) + "\\n" for r in records)
        (folder / dataset / "part-00001.jsonl").write_text(lines)

MODELS = {
    "int_jms__consumer_failure_runs": (
        "server_name, date_format(attempted_at, 'HH:mm') as hhmm, any_type_run, "
        "same_type_run, previous_outcome, previous_exception_class"
    ),
    "int_service_broker__queue_rollback_runs": (
        "date_format(attempted_at, 'HH:mm') as hhmm, rollback_run, queue_attempt_number"
    ),
}

def runs(e):
    return {
        m: sorted(list(r) for r in e.query(
            f"select {cols} from poisonwatch_intermediate.{m}")[1])
        for m, cols in MODELS.items()
    }

def files(e, model):
    rows = e.query(
        f"select distinct attempt_partition, input_file_name() "
        f"from poisonwatch_intermediate.{model}"
    )[1]
    out = {}
    for partition, name in rows:
        out.setdefault(partition[11:13], []).append(name)
    return {hour: sorted(names) for hour, names in out.items()}

def build(*args):
    run_dbt(["run", "--select", *("+" + m for m in MODELS), *args])

work = Path(WORK)
land(work / "first", late=False)
land(work / "late", late=True)
out = {"rejected": []}
with connect("local") as e:
    out["rejected"].append(ingest(e, work / "first").rejected_total)
    run_dbt(["seed", "--select", "error_classes"])
    build()
    before = {m: files(e, m) for m in MODELS}
    out["rejected"].append(ingest(e, work / "late").rejected_total)
    build()
    after = {m: files(e, m) for m in MODELS}
    out["kept"] = {
        m: sorted(h for h in before[m] if before[m][h] == after[m].get(h)) for m in MODELS
    }
    out["incremental"] = runs(e)
    build("--full-refresh")
    out["full"] = runs(e)
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def found(shared_store: SharedChild, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    work = tmp_path_factory.mktemp("carried-runs")
    return shared_store.run(f"WORK = {str(work)!r}\n" + SCRIPT)


def test_everything_landed(found: dict[str, Any]) -> None:
    assert found["rejected"] == [0, 0]


def test_failure_runs_continue_across_hours_after_a_late_failure(found: dict[str, Any]) -> None:
    # (server, hh:mm, any-type run, same-type run, previous outcome, previous class)
    e1, e2, e3 = "java.lang.IllegalStateException", "java.net.ConnectException", "E3Exception"
    assert found["incremental"]["int_jms__consumer_failure_runs"] == [
        ["S1", "00:01", 1, 1, None, None],
        ["S1", "00:02", 2, 2, "rolled_back", e1],
        # carried into the rewritten hours 01-04 from 00:02
        ["S1", "01:06", 3, 3, "rolled_back", e1],
        ["S1", "01:07", 0, 0, "rolled_back", e1],
        ["S1", "01:08", 1, 1, "acknowledged", None],  # the late failure
        ["S1", "02:11", 2, 2, "rolled_back", e2],
        ["S1", "03:16", 3, 3, "rolled_back", e2],
        ["S1", "04:21", 0, 0, "rolled_back", e2],
        ["S1", "05:26", 1, 1, "acknowledged", None],
        # carried into the new hour 06 from 05:26, an hour that was not rewritten
        ["S1", "06:31", 2, 2, "rolled_back", e3],
        ["S2", "00:03", 1, 1, None, None],
        # S2 has no new attempt: its run is carried into the rewritten hour 02 from 00:03
        ["S2", "02:12", 2, 2, "rolled_back", e1],
        # carried into hour 06 from 02:12, a row of the other segment rewritten in this run
        ["S2", "06:40", 3, 3, "rolled_back", e1],
    ]


def test_rollback_runs_continue_across_hours_after_a_late_rollback(
    found: dict[str, Any],
) -> None:
    # (hh:mm, rollback run, number of the attempt in its hour)
    assert found["incremental"]["int_service_broker__queue_rollback_runs"] == [
        ["00:01", 1, 1],
        ["00:02", 2, 2],
        ["01:06", 3, 1],  # carried from 00:02
        ["01:07", 0, 2],
        ["01:08", 1, 3],  # the late rollback
        ["02:11", 2, 1],
        ["03:16", 0, 1],
        ["05:26", 1, 1],
        ["06:31", 2, 1],  # carried from 05:26
    ]


def test_incremental_runs_equal_a_full_refresh(found: dict[str, Any]) -> None:
    assert found["incremental"] == found["full"]


def test_hours_outside_the_segments_keep_their_files(found: dict[str, Any]) -> None:
    # Failure runs: the late failure at 01:08 leaves S1's run open until the acknowledgement
    # at 04:21, so hours 01-04 are rewritten, and the new hour 06; 00 and 05 are kept.
    # Rollback runs: open from 01:08 until the commit at 03:16; 00 and 05 are kept.
    assert found["kept"] == {
        "int_jms__consumer_failure_runs": ["00", "05"],
        "int_service_broker__queue_rollback_runs": ["00", "05"],
    }
