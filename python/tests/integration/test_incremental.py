"""Incremental dbt runs give the same marts as a full refresh, late-arriving attempts included.

One workload is generated, then split: the newest attempt files and two files from the middle
of the history (late arrivals: attempts older than what is already loaded) are held back. The
first part is ingested and built; the held-back files are ingested and the models run
incrementally; the marts are saved; a full refresh rebuilds everything from the same raw data;
the marts, and the runs of the two gaps-and-islands models attempt by attempt, must be equal
row for row, and must agree 100 % with the generator's labels.
The same label check runs at a second seed (11) in scripts/test.sh, after a full `dbt build`.
Every step after generating runs in one child process with one SparkSession shared with dbt, as
`poisonwatch demo` and the benchmark do: the command-line chain itself (ingest, dbt, verify as
separate processes) is what scripts/test.sh runs; one process pays for one JVM start and one
dbt parse.
The runs select the marts compared here and every incremental model, with all they are built
from (`config.materialized:incremental`, so a new incremental model is in without a change here).
Left out: the alert models (tables and views, none incremental) and the on-demand backtests;
scripts/test.sh builds every model.
Attempts and messages are partitioned by 5-minute buckets here (the project's default is an
hour), so the two-hour workload spans about 25 partitions and the incremental run must leave
most of them as they were; much smaller buckets would spend the test's time writing and
registering partitions.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from support.child_python import run_py

from poisonwatch.config import MARTS
from poisonwatch.generate import generate

ROOT = Path(__file__).resolve().parents[3]
VARS = "{message_partition_seconds: 300, attempt_partition_seconds: 300}"
# The compared marts and every incremental model (two of them feed only the alerts), with what
# they are built from.
SELECT = [*(f"+{mart}" for mart in MARTS), "+config.materialized:incremental"]
# The gaps-and-islands models rewrite only some buckets (rewrite_segments): their runs, attempt
# by attempt, must be those of a full refresh too, and so must the queues' and consumers' hours
# summarized from the buckets they rewrote (rewritten_at). (Island numbers are not compared:
# they count from the start of the segment that computed the row.)
RUN_COLUMNS = {
    "int_service_broker__queue_rollback_runs": (
        "attempt_key, queue_attempt_number, rollback_run, attempt_partition"
    ),
    "int_service_broker__queue_hours_summarized": (
        "queue_key, longest_rollback_run, last_rollback_run, attempt_partition"
    ),
    "int_jms__consumer_failure_runs": (
        "attempt_key, previous_outcome, previous_exception_class, starts_same_type_island, "
        "any_type_run, same_type_run, attempt_partition"
    ),
    # The broker settings per queue (a newest snapshot wins, a late older one does not).
    "int_jms__queue_settings_resolved": (
        "queue_name, broker_name, snapshot_at, max_delivery_attempts, redelivery_delay_ms, "
        "redelivery_multiplier, max_redelivery_delay_ms, dead_letter_address"
    ),
    "int_jms__consumer_hours_summarized": (
        "consumer_id, server_name, longest_same_type_run, longest_any_type_run, "
        "same_type_exception_class, same_type_run_end_at, same_type_run_end_source_file, "
        "same_type_run_end_record_number, same_type_run_end_attempt_key, attempt_partition"
    ),
}
# The JMS ordering check recomputes only the rows a run can change (int_jms__message_ordering):
# its rows, and the per-message summary it reads, must be a full refresh's too (not the
# columns that record which run changed them, nor the partition layout).
ORDERING_COLUMNS = {
    "int_jms__messages_summarized": (
        "message_key, broker_name, queue_name, message_id, first_attempted_at, "
        "acknowledged_at, failure_count, redelivered_count"
    ),
    "int_jms__message_ordering": (
        "message_key, broker_name, queue_name, message_id, first_attempted_at, "
        "acknowledged_at, failure_count, redelivered_count, "
        "first_later_message_acknowledged_at, has_out_of_order_processing"
    ),
}

SEQUENCED = "poisonwatch_intermediate.int_receive_attempts_sequenced"
# The models that record the newest landing batch they hold (record_batch_watermark).
BATCH_MODELS = [
    "int_receive_attempts_sequenced",
    "int_service_broker__queue_rollback_runs",
    "int_jms__consumer_failure_runs",
    "int_jms__queue_settings_resolved",
]
# The incremental models partitioned like the sequenced attempts (message_partition).
MESSAGE_PARTITIONED = [
    "int_receive_attempts_sequenced",
    "int_messages_classified",
    "int_failures_grouped",
    "int_jms__redelivery_schedule",
    "int_service_broker__conversations_ended",
    "int_jms__consumer_servers_summarized",
    "int_jms__messages_summarized",
    "int_jms__message_ordering",
]
# The data tests the incremental run builds with its models (`dbt build --select
# config.materialized:incremental`), by name, so that a test gone from a model's yml fails here
# instead of leaving the run a test short.
SCOPED_TESTS = frozenset(
    {
        "accepted_values_columns_int_messages_classified__service_broker_jms____transient_permanent_validation_unknown____recovered_retrying_suspect_poison____succeeded_after_failures_invalid_content_permanent_error_disposable_threshold_exceeded_max_deliveries_at_threshold_below_threshold_",
        "accepted_values_columns_int_receive_attempts_sequenced__service_broker_jms____committed_rolled_back_rolled_back_to_savepoint_ended_conversation_acknowledged_temporarily_unavailable____transient_permanent_validation_unknown_",
        "not_negative_int_failures_grouped_failure_count",
        "not_negative_int_jms__consumer_failure_runs_any_type_run",
        "not_negative_int_jms__consumer_failure_runs_same_type_run",
        "not_negative_int_jms__consumer_hours_summarized_longest_any_type_run",
        "not_negative_int_jms__consumer_hours_summarized_longest_same_type_run",
        "not_negative_int_receive_attempts_sequenced_consecutive_failures",
        "not_negative_int_service_broker__queue_hours_summarized_longest_rollback_run",
        "not_negative_int_service_broker__queue_rollback_runs_rollback_run",
        "not_null_columns_int_failures_grouped_sequenced_at",
        "not_null_columns_int_jms__consumer_failure_runs_batch_id__sequenced_at__attempt_partition",
        "not_null_columns_int_jms__consumer_hours_summarized_attempt_count__first_attempted_at__last_attempted_at__longest_same_type_run__longest_any_type_run__same_type_run_end_attempt_key",
        "not_null_columns_int_jms__consumer_servers_summarized_first_attempted_at__last_attempted_at__sequenced_at",
        "not_null_columns_int_jms__messages_summarized_broker_name__queue_name__first_attempted_at__ordering_changed_at__sequenced_at__message_partition",
        "not_null_columns_int_jms__redelivery_schedule_sequenced_at__message_partition",
        "not_null_columns_int_messages_classified_sequenced_at__message_partition__failure_class__classification__reason",
        "not_null_columns_int_receive_attempts_bucketed_queue_key__bucket_start",
        "not_null_columns_int_receive_attempts_sequenced_message_key__broker_kind__batch_id__attempt_number__sequenced_at__is_latest_failure__message_partition",
        "not_null_columns_int_service_broker__conversations_ended_attempt_ended_at__sequenced_at",
        "not_null_columns_int_service_broker__queue_hours_summarized_longest_rollback_run__last_rollback_run",
        "not_null_columns_int_service_broker__queue_rollback_runs_batch_id__sequenced_at__rollback_run__attempt_partition",
        "primary_key_int_failures_grouped_message_partition__failure_group_id",
        "primary_key_int_jms__consumer_failure_runs_attempt_key",
        "primary_key_int_jms__consumer_hours_summarized_consumer_id__server_name__attempt_partition",
        "primary_key_int_jms__consumer_servers_summarized_consumer_id__server_name__message_partition",
        "primary_key_int_jms__message_ordering_message_key",
        "primary_key_int_jms__messages_summarized_message_key",
        "primary_key_int_jms__queue_settings_resolved_queue_settings_key",
        "primary_key_int_jms__redelivery_schedule_attempt_key",
        "primary_key_int_messages_classified_message_key",
        "primary_key_int_receive_attempts_bucketed_attempt_bucket_key",
        "primary_key_int_receive_attempts_sequenced_attempt_key",
        "primary_key_int_service_broker__conversations_ended_server_name__database_name__conversation_handle__message_partition",
        "primary_key_int_service_broker__queue_hours_summarized_queue_key__attempt_partition",
        "primary_key_int_service_broker__queue_rollback_runs_attempt_key",
        "relationships_consumer_circuit_breakers_consumer_id__consumer_id__ref_int_jms__consumer_servers_summarized_",
        "relationships_in_partitions_int_messages_classified_message_key__message_key__message_partition__ref_int_receive_attempts_sequenced_",
    }
)

LAYOUT = f"""
    with attempts as (
        select
            message_key,
            message_partition,
            batch_id,
            is_success or is_conversation_end as is_settling,
            min(batch_id) over (partition by message_key) as first_batch_id,
            max(batch_id) over () as delta_batch_id
        from {SEQUENCED}
    ),

    messages as (
        select
            message_key,
            count(distinct message_partition) as partitions,
            max(message_partition) as message_partition,
            bool_and(batch_id = delta_batch_id) as is_new,
            coalesce(bool_or(batch_id = first_batch_id and is_settling), false) as was_settled
        from attempts
        group by message_key
    )

    select
        count_if(is_new) as new_messages,
        count_if(message_partition like '% open%') as open_messages,
        count_if(partitions > 1) as split_messages,
        count_if(is_new <> (message_partition rlike ' r[0-9]{{8}}T[0-9]{{6}}$'))
            as misplaced_by_run,
        count_if(was_settled = (message_partition like '% open%')) as misplaced_by_state
    from messages
"""

# Runs in the child: both ingests, the incremental and the full-refresh builds, the label check
# and the mart comparison; prints one JSON line prefixed with "@@".
STEPS = """
import json
import re
from pathlib import Path
from poisonwatch.warehouse.dbtrun import (
    dbt_log_path, last_invocation_stamp, run_dbt, target_path,
)
from poisonwatch.warehouse.engine import connect
from poisonwatch.ingest import ingest
from poisonwatch.quality.labels import compare_labels

def dbt(*args, changed_since=None):
    run_dbt([*args, "--vars", VARS], changed_since=changed_since)

def run(*args):
    dbt("run", "--select", *SELECT, *args)

def recorded_batches(engine):
    # Per model that records its newest batch (record_batch_watermark): pending, committed,
    # and the newest batch_id of its rows.
    pairs = {}
    for model in BATCH_MODELS:
        table = "poisonwatch_intermediate." + model
        props = {row[0]: row[1] for row in engine.query(f"show tblproperties {table}")[1]}
        pairs[model] = [
            props.get("poisonwatch.batch_watermark.pending"),
            props.get("poisonwatch.batch_watermark"),
            engine.scalar(f"select max(batch_id) from {table}"),
        ]
    return pairs

out = {"rejected": [], "marts": {}}
with connect("local") as engine:
    out["rejected"].append(ingest(engine, Path(LANDING)).rejected_total)
    dbt("seed")
    run()
    # The stamp the first run's models wrote, as `poisonwatch build` records it and hands it
    # to the next build: the incremental run reads what was stamped after it, by a literal.
    out["stamp"] = [
        last_invocation_stamp(),
        engine.scalar(f"select cast(max(sequenced_at) as string) from {SEQUENCED}"),
    ]
    out["first_batches"] = recorded_batches(engine)
    out["rejected"].append(ingest(engine, Path(DELTA)).rejected_total)
    log_start = dbt_log_path().stat().st_size
    # The incremental models and their data tests in one invocation, as `poisonwatch build`
    # runs them (bounded by the first run's stamp), then the rest of the selection. Nothing
    # else is upstream of them but the staging views and the policy seeds' table, which this
    # delta does not change.
    dbt("build", "--select", "config.materialized:incremental", "--exclude-resource-type",
        "unit_test", changed_since=out["stamp"][0])
    results = json.loads((target_path() / "run_results.json").read_text())["results"]
    run("--exclude", "config.materialized:incremental")
    with dbt_log_path().open(encoding="utf-8", errors="replace") as fh:
        fh.seek(log_start)
        incremental_log = fh.read()
    # How the models downstream found the partitions the sequenced attempts rewrote: in SQL,
    # after the first run's stamp.
    out["changed_since_filters"] = len(re.findall(
        r"where changed\\.sequenced_at > timestamp '" + re.escape(out["stamp"][0]) + "'",
        incremental_log,
    ))
    out["batches"] = recorded_batches(engine)
    out["settings"] = {
        row[0]: [str(row[1]), row[2]] for row in engine.query(
            "select queue_name, snapshot_at, max_delivery_attempts "
            "from poisonwatch_intermediate.int_jms__queue_settings_resolved"
        )[1]
    }
    out["sequenced_sql"] = next(
        r["compiled_code"] for r in results
        if r["unique_id"].endswith(".int_receive_attempts_sequenced")
    )
    # The scoped data tests of the incremental models: they check the rows stamped after the
    # first run's stamp (test_scope_filter).
    out["scoped_tests"] = {
        r["unique_id"].split(".")[2]: [r["status"], r["compiled_code"]]
        for r in results
        if r["unique_id"].startswith("test.")  # not the on-run-start hook
    }
    report = compare_labels(engine, Path(LANDING) / "labels.jsonl")
    out["labels_ok"] = report.ok
    out["labels"] = [vars(k) for k in report.kinds]
    # Partitions the held-back files did not touch kept the first run's rows.
    out["runs"] = engine.scalar(
        "select count(distinct sequenced_at) "
        "from poisonwatch_intermediate.int_receive_attempts_sequenced"
    )
    # Where the messages went (new_message_partition): each message in one partition; a
    # message first seen by the incremental run in a partition of that run, no older one in
    # such a partition; a message in an open partition if and only if no attempt of the
    # landing batch it was first seen in settled it.
    out["layout"] = engine.query(LAYOUT)[1][0]
    engine.execute("create database if not exists compare")
    compared = {mart: f"select * from poisonwatch.{mart}" for mart in MARTS}
    for model, columns in {**RUN_COLUMNS, **ORDERING_COLUMNS}.items():
        compared[model] = f"select {columns} from poisonwatch_intermediate.{model}"
    for name, query in compared.items():
        engine.execute(f"drop table if exists compare.{name}")
        engine.execute(f"create table compare.{name} as {query}")
    # The two failed messages whose answer the crafted late attempts changed, as the
    # incremental run left it.
    ids = ", ".join(f"'{queue}|{message_id}'" for queue, message_id, _ in CRAFTED.values())

    def answers(table):
        return sorted(engine.query(
            "select queue_name, message_id, "
            "unix_micros(first_later_message_acknowledged_at) "
            f"from {table} where concat(queue_name, '|', message_id) in ({ids})"
        )[1])

    out["crafted"] = answers("compare.int_jms__message_ordering")
    run("--full-refresh")
    out["crafted_full"] = answers("poisonwatch_intermediate.int_jms__message_ordering")
    out["samples"] = {}
    for name, query in compared.items():
        only_incremental = f"select * from compare.{name} except all {query}"
        only_full = f"{query} except all select * from compare.{name}"
        out["marts"][name] = [
            engine.scalar(f"select count(*) from ({query})"),
            engine.scalar(f"select count(*) from ({only_incremental})"),
            engine.scalar(f"select count(*) from ({only_full})"),
        ]
        if out["marts"][name][1:] != [0, 0]:
            # A few differing rows each way, so a failure shows which columns differ.
            out["samples"][name] = [
                engine.query(f"select * from ({only_incremental}) limit 3")[1],
                engine.query(f"select * from ({only_full}) limit 3")[1],
            ]
print("@@" + json.dumps(out, default=str))
"""


def _hold_back(landing: Path, delta: Path) -> int:
    """Move the newest attempt files and two from the middle into `delta`; returns files moved."""
    moved = 0
    for dataset, middle in (("ssb_receive_attempts", True), ("jms_receive_attempts", True)):
        files = sorted((landing / dataset).iterdir())
        assert len(files) >= 6, f"{dataset}: too few files to split ({len(files)})"
        chosen = [files[-1]] + ([files[len(files) // 2]] if middle else [])
        (delta / dataset).mkdir(parents=True, exist_ok=True)
        for f in chosen:
            shutil.move(f, delta / dataset / f.name)
            moved += 1
    return moved


def _craft_settings(landing: Path, delta: Path) -> dict[str, list]:
    """Land in the delta two `jms_address_settings` rows: for one queue a snapshot a second
    after the newest, with that queue's values (so no verdict changes), which must replace its
    row; for another a late snapshot an hour before the oldest, saying 3 deliveries, which must
    not. Returns, per queue, [snapshot_at as Spark prints it, max_delivery_attempts] after."""
    rows = [
        row
        for path in sorted((landing / "jms_address_settings").iterdir())
        for row in pq.read_table(path).to_pylist()
    ]
    newest_at = max(r["snapshot_at"] for r in rows)
    oldest_at = min(r["snapshot_at"] for r in rows)
    latest = {r["queue_name"]: r for r in sorted(rows, key=lambda r: r["snapshot_at"])}
    first, second = sorted(latest)[:2]
    newer = {**latest[first], "snapshot_at": newest_at + timedelta(seconds=1)}
    late = {**latest[second], "snapshot_at": oldest_at - timedelta(hours=1)}
    late["max_delivery_attempts"] = 3
    (delta / "jms_address_settings").mkdir(parents=True, exist_ok=True)
    (delta / "jms_address_settings" / "crafted.jsonl").write_text(
        "".join(
            json.dumps({**r, "snapshot_at": r["snapshot_at"].isoformat()}) + "\n"
            for r in (newer, late)
        ),
        encoding="utf-8",
    )

    def shown(at: datetime) -> str:
        return at.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")

    return {
        first: [shown(newer["snapshot_at"]), newer["max_delivery_attempts"]],
        second: [shown(latest[second]["snapshot_at"]), latest[second]["max_delivery_attempts"]],
    }


def _jms_attempts(folder: Path) -> list[dict]:
    """Every JMS attempt record of a landing folder, with its time in whole microseconds."""
    records = []
    for path in sorted((folder / "jms_receive_attempts").iterdir()):
        opener = gzip.open if path.name.endswith(".gz") else open
        with opener(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    record = json.loads(line)
                    # Spark keeps microseconds: the generator writes up to nine digits.
                    whole, _, fraction = record["attempted_at"].rstrip("Z").partition(".")
                    seconds = datetime.fromisoformat(whole).replace(tzinfo=UTC)
                    record["us"] = int(seconds.timestamp()) * 1_000_000 + int(
                        (fraction + "000000")[:6]
                    )
                    records.append(record)
    return records


def _at(us: int) -> str:
    return (
        datetime.fromtimestamp(us // 1_000_000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        + f".{us % 1_000_000:06d}Z"
    )


def _craft_ordering_changes(landing: Path, delta: Path) -> dict[str, list]:
    """Add to the delta two late JMS attempts that change the ordering answer (the first later
    acknowledgement) of two failed messages in partitions the incremental run does not
    rewrite, so only int_jms__message_ordering's threshold rows can bring them up to date:
    - `lowered`: a new message, acknowledged 1 us after the failed message's acknowledgement
      and before its answer: the answer moves earlier;
    - `raised`: the message whose acknowledgement is another failed message's answer (in
      another partition) gets an acknowledged delivery 1 us before that message's first
      delivery: it is no longer later, and the answer moves to the next one.
    Both acknowledge on a server of their own, so no consumer's failure run is reset, and
    neither adds a failure (the labels stay true). Returns, per case, the failed message's
    queue and id and its answer after the delta, in microseconds since the epoch."""
    touched = {(r["broker_name"], r["queue_name"], r["message_id"]) for r in _jms_attempts(delta)}
    messages: dict[tuple, dict] = {}
    for record in _jms_attempts(landing):
        key = (record["broker_name"], record["queue_name"], record["message_id"])
        message = messages.setdefault(key, {"first": record["us"], "ack": None, "failed": 0})
        message.setdefault("record", record)
        message["first"] = min(message["first"], record["us"])
        if record["outcome"] == "acknowledged":
            message["ack"] = min(message["ack"] or record["us"], record["us"])
        elif record["outcome"] in ("rolled_back", "temporarily_unavailable"):
            message["failed"] += 1

    def bucket(key: tuple) -> int:  # the 5-minute partition of VARS
        return messages[key]["first"] // 300_000_000

    busy = {bucket(key) for key in touched if key in messages}
    candidates = []  # (failed message, its answer's message, the next answer), queue by queue
    for queue in sorted({key[:2] for key in messages}):
        order = sorted((m["first"], k) for k, m in messages.items() if k[:2] == queue)
        for i, (_, key) in enumerate(order):
            message = messages[key]
            later = sorted((messages[k]["ack"], k) for _, k in order[i + 1 :] if messages[k]["ack"])
            if message["failed"] and message["ack"] and key not in touched and len(later) > 1:
                candidates.append((key, later[0], later[1]))
    late = {
        "server_name": "SRVLATE01",
        "outcome": "acknowledged",
        "delivery_count": 1,
        "redelivered": False,
        "exception_class": None,
        "exception_message": None,
        "stack_trace": None,
    }
    crafted: dict[str, dict] = {}
    expected: dict[str, list] = {}
    lowered_queue = None
    for key, (answer, _), _ in candidates:
        if bucket(key) not in busy and answer > messages[key]["ack"] + 10:
            crafted["lowered"] = {
                **messages[key]["record"],
                **late,
                "message_id": key[2] + ":late",
                "attempted_at": _at(messages[key]["ack"] + 1),
            }
            expected["lowered"] = [key[1], key[2], messages[key]["ack"] + 1]
            busy.add(bucket(key))
            lowered_queue = key[:2]
            break
    for key, (_, answer_key), (next_answer, _) in candidates:
        overtaker = messages[answer_key]
        if (
            key[:2] != lowered_queue
            and bucket(key) not in busy | {bucket(answer_key)}
            and not overtaker["failed"]
            and answer_key not in touched
        ):
            crafted["raised"] = {
                **overtaker["record"],
                **late,
                "attempted_at": _at(messages[key]["first"] - 1),
            }
            expected["raised"] = [key[1], key[2], next_answer]
            break
    assert set(crafted) == {"lowered", "raised"}, (len(candidates), sorted(crafted))
    records = [{k: v for k, v in r.items() if k != "us"} for r in crafted.values()]
    (delta / "jms_receive_attempts" / "part-99999-late.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records)
    )
    return expected


@pytest.mark.slow
def test_incremental_equals_full_refresh(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["POISONWATCH_HOME"] = str(tmp_path / "store")
    env["POISONWATCH_TARGET"] = "local"
    landing, delta = tmp_path / "landing", tmp_path / "delta"
    generate(landing, seed=31, attempts=6000, chunk_records=300)
    assert _hold_back(landing, delta) == 4
    crafted = _craft_ordering_changes(landing, delta)
    settings = _craft_settings(landing, delta)
    constants = (
        f"LANDING = {str(landing)!r}\nDELTA = {str(delta)!r}\nVARS = {VARS!r}\n"
        f"MARTS = {list(MARTS)!r}\nSELECT = {SELECT!r}\nRUN_COLUMNS = {RUN_COLUMNS!r}\n"
        f"ORDERING_COLUMNS = {ORDERING_COLUMNS!r}\nCRAFTED = {crafted!r}\n"
        f"LAYOUT = {LAYOUT!r}\nSEQUENCED = {SEQUENCED!r}\nBATCH_MODELS = {BATCH_MODELS!r}\n"
    )
    out = run_py(constants + STEPS, env)
    assert out is not None, "the child printed no result"

    assert out["rejected"] == [0, 0], out["rejected"]  # as `ingest --strict` would demand
    assert out["labels_ok"], json.dumps(out["labels"], indent=1)  # 100 % agreement
    assert out["runs"] == 2, out["runs"]
    # Each run left its newest batch on the table, before (pending) and after it wrote; the
    # incremental run took the batches after the one the first run recorded, read back from
    # the table's properties, and none newer than those it found landed.
    for pairs in (out["first_batches"], out["batches"]):
        for model, (pending, committed, newest) in pairs.items():
            assert newest is not None and pending == committed == newest, (model, pairs)
    first = out["first_batches"]["int_receive_attempts_sequenced"][2]
    delta = out["batches"]["int_receive_attempts_sequenced"][2]
    assert first < delta, (first, delta)
    assert f"batch_id > '{first}' and batch_id <= '{delta}'" in out["sequenced_sql"]
    # The stamp recorded after a build is the one its models wrote; the readers of the
    # sequenced attempts (and int_jms__message_ordering of the summarized messages) found
    # what changed after it in SQL, each in the log at least once.
    stamp, newest = out["stamp"]
    assert stamp is not None and stamp == newest, out["stamp"]
    assert out["changed_since_filters"] >= len(MESSAGE_PARTITIONED), out["changed_since_filters"]
    new_messages, open_messages, *misplaced = out["layout"]
    assert new_messages > 0 and open_messages > 0, out["layout"]
    assert misplaced == [0, 0, 0], out["layout"]  # split, by run, by state
    # Each scoped test of the incremental models passed, and each checked the rows stamped
    # after the first run's stamp (a literal: no scan for a newest value at compile time).
    assert set(out["scoped_tests"]) == SCOPED_TESTS, (
        f"missing: {sorted(SCOPED_TESTS - set(out['scoped_tests']))}; "
        f"unexpected: {sorted(set(out['scoped_tests']) - SCOPED_TESTS)}"
    )
    for name, (status, sql) in out["scoped_tests"].items():
        assert status == "pass", (name, status)
        # The run models and their hours: every row a run rewrites carries its rewritten_at
        # (earlier attempts in a rewritten hour keep their sequenced_at).
        rewritten = any(part in name for part in ("hours_summarized", "_runs_"))
        column = "rewritten_at" if rewritten else "sequenced_at"
        if name.startswith("relationships_consumer_circuit_breakers") or any(
            part in name for part in ("queue_settings_resolved", "message_ordering")
        ):
            continue  # a mart's test; the settings and the ordering check: every row
        assert f"{column} > timestamp '{stamp}'" in sql, (name, sql)
    # The crafted late attempts moved one failed message's answer earlier and another's later,
    # in partitions the run did not rewrite: the incremental run's ordering rows have them.
    assert out["crafted"] == out["crafted_full"] == sorted(crafted.values()), crafted
    # The incremental run took the delta's settings: the newer snapshot replaced its queue's
    # row, the late older one did not replace the other's.
    for queue, want in settings.items():
        assert out["settings"][queue] == want, (queue, out["settings"][queue], want)
    assert set(out["marts"]) == {*MARTS, *RUN_COLUMNS, *ORDERING_COLUMNS}, out["marts"]
    assert all(total > 0 for total, _, _ in out["marts"].values()), out["marts"]
    differing = {
        mart: (
            f"{only_incremental} row(s) only in the incremental build, e.g. "
            f"{out['samples'][mart][0]}; {only_full} only in the full refresh, e.g. "
            f"{out['samples'][mart][1]}"
        )
        for mart, (_, only_incremental, only_full) in out["marts"].items()
        if (only_incremental, only_full) != (0, 0)
    }
    assert not differing, json.dumps(differing, indent=1, default=str)
