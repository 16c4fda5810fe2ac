"""`poisonwatch check`: the great-expectations suites on real Spark and real GX.

One SparkSession for the module's tests, on a store of its own. The raw tables are created by
`create_raw_tables` and filled with a few hand-written rows that follow the landing contract; the
marts are stand-ins with the contract's columns (docs/marts.md) whose rows agree with those raw
rows, so the mart suites run without `dbt build`. Each defect test copies the clean data into
databases of its own, breaks one thing, and shows the right expectation failing.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from support.store import store_fixture

from poisonwatch import config
from poisonwatch.quality import checks
from poisonwatch.warehouse.schemas import DATASETS, RAW_DATABASE, create_raw_tables

H1 = "6F9619FF-8B86-D011-B42D-00C04FC964F1"
H2 = "6F9619FF-8B86-D011-B42D-00C04FC964F2"
H3 = "6F9619FF-8B86-D011-B42D-00C04FC964F3"
G1 = "0E984725-C51C-4BF4-9960-E1C80E27ABA1"
G2 = "0E984725-C51C-4BF4-9960-E1C80E27ABA2"
MARTS = "checks_marts"
SB = {"server_name": "SQL01", "database_name": "AdventureWorks", "queue_name": "ExpenseQueue"}
JMS = {"broker_name": "artemis-1", "address": "orders", "queue_name": "orders"}


def ts(hhmm: str, day: str = "2026-01-01") -> datetime:
    return datetime.fromisoformat(f"{day}T{hhmm}:00").replace(tzinfo=UTC)


# ---------------------------------------------------------------------------------------------
# Clean data


def raw_rows() -> dict[str, list[dict[str, Any]]]:
    """Every row in batch b1, which the ledger commits: the raw suites read committed batches
    only, so a defect row copied from these is checked as well."""
    return {
        name: [{**row, "_batch_id": "b1"} for row in rows] for name, rows in _raw_rows().items()
    }


def _raw_rows() -> dict[str, list[dict[str, Any]]]:
    ssb = {**SB, "message_type_name": "//Adventure-Works.com/Expenses/SubmitExpense"}
    attempt = {**ssb, "reader": "reader-1"}
    jms = {**JMS, "consumer_id": "agent.orders", "server_name": "APP01", "message_type": "Order"}
    return {
        "ssb_receive_attempts": [
            {**attempt, "attempted_at": ts("10:01"), "conversation_group_id": G1,
             "conversation_handle": H1, "message_sequence_number": 0, "outcome": "rolled_back",
             "error_number": 1205, "error_message": "deadlock victim", "attempt_id": "a1"},
            {**attempt, "attempted_at": ts("10:02"), "conversation_group_id": G1,
             "conversation_handle": H1, "message_sequence_number": 0, "outcome": "rolled_back",
             "error_number": 1205, "error_message": "deadlock victim", "attempt_id": "a2"},
            {**attempt, "attempted_at": ts("10:03"), "conversation_group_id": G1,
             "conversation_handle": H1, "message_sequence_number": 0, "outcome": "committed",
             "attempt_id": "a3"},
            {**attempt, "attempted_at": ts("10:04"), "conversation_group_id": G2,
             "conversation_handle": H2, "message_sequence_number": 0,
             "outcome": "rolled_back_to_savepoint", "error_number": 2627,
             "error_message": "duplicate key", "attempt_id": "a4"},
            {**attempt, "attempted_at": ts("10:05"), "conversation_group_id": G2,
             "conversation_handle": H2, "message_sequence_number": 0,
             "outcome": "rolled_back_to_savepoint", "error_number": 2627,
             "error_message": "duplicate key", "attempt_id": "a5"},
            {**attempt, "attempted_at": ts("10:06"), "conversation_group_id": G1,
             "conversation_handle": H3, "message_sequence_number": 0, "outcome": "committed",
             "attempt_id": "a6"},
        ],
        "ssb_queue_snapshots": [
            {**ssb, "snapshot_at": ts("10:00"), "status": 1, "priority": 5, "queuing_order": 1,
             "conversation_group_id": G1, "conversation_handle": H1,
             "message_sequence_number": 0, "validation": "X", "message_body": "PABhAC8APgA=",
             "message_enqueue_time": ts("09:59")},
            {**ssb, "snapshot_at": ts("11:00"), "status": 1, "priority": 5, "queuing_order": 2,
             "conversation_group_id": G2, "conversation_handle": H2,
             "message_sequence_number": 0, "validation": "X", "message_body": "PABhAC8APgA=",
             "message_enqueue_time": ts("09:58")},
            {**ssb, "snapshot_at": ts("11:00"), "status": 1, "priority": 5, "queuing_order": 3,
             "conversation_group_id": G2, "conversation_handle": H2,
             "message_sequence_number": 1, "validation": "E", "message_body": "",
             "message_enqueue_time": ts("10:30")},
        ],
        "ssb_queue_states": [
            {**SB, "snapshot_at": ts("10:00"), "is_receive_enabled": True,
             "is_enqueue_enabled": True, "is_activation_enabled": True,
             "is_poison_message_handling_enabled": True, "max_readers": 2},
            {**SB, "snapshot_at": ts("11:00"), "is_receive_enabled": True,
             "is_enqueue_enabled": True, "is_activation_enabled": True,
             "is_poison_message_handling_enabled": True, "max_readers": 2},
        ],
        "ssb_broker_events": [
            {**SB, "event_time": ts("10:00"), "event_type": "QUEUE_ACTIVATION"},
        ],
        "jms_receive_attempts": [
            {**jms, "attempted_at": ts("10:10"), "message_id": "ID:msg-1", "delivery_count": 1,
             "redelivered": False, "outcome": "rolled_back",
             "exception_class": "java.net.ConnectException", "exception_message": "refused"},
            {**jms, "attempted_at": ts("10:11"), "message_id": "ID:msg-1", "delivery_count": 2,
             "redelivered": True, "outcome": "rolled_back",
             "exception_class": "java.net.ConnectException", "exception_message": "refused"},
            {**jms, "attempted_at": ts("10:12"), "message_id": "ID:msg-1", "delivery_count": 3,
             "redelivered": True, "outcome": "acknowledged"},
        ],
        "jms_queue_snapshots": [
            {**JMS, "snapshot_at": ts("10:09"), "message_id": "ID:msg-1",
             "enqueued_at": ts("10:05"), "delivery_count": 0, "priority": 4,
             "message_type": "Order", "body": "{}", "properties": '{"tenant": "a"}'},
            {**JMS, "queue_name": "DLQ", "address": "DLQ", "snapshot_at": ts("11:00"),
             "message_id": "ID:msg-9", "enqueued_at": ts("10:50"), "delivery_count": 10,
             "orig_address": "orders", "orig_queue": "orders", "message_type": "Order",
             "body": "{}", "properties": "{}"},
        ],
        "jms_address_settings": [
            {**JMS, "snapshot_at": ts("10:09"), "max_delivery_attempts": 10,
             "redelivery_delay_ms": 1000, "redelivery_multiplier": 1.5,
             "max_redelivery_delay_ms": 60000, "dead_letter_address": "DLQ"},
            {**JMS, "queue_name": "DLQ", "address": "DLQ", "snapshot_at": ts("10:09"),
             "max_delivery_attempts": -1, "redelivery_delay_ms": 0,
             "redelivery_multiplier": 1.0, "max_redelivery_delay_ms": 0},
        ],
        "jms_activations": [
            {"activation_id": "act-1", "consumer_id": "agent.orders", "server_name": "APP01",
             "started_at": ts("10:00"), "finished_at": ts("10:30"), "status": "succeeded"},
            {"activation_id": "act-2", "consumer_id": "agent.orders", "server_name": "APP01",
             "started_at": ts("10:40"), "status": "running"},
            # Seed 002: the same activation id on another server is another activation.
            {"activation_id": "act-1", "consumer_id": "agent.orders", "server_name": "APP02",
             "started_at": ts("10:05"), "finished_at": ts("10:20"), "status": "failed"},
        ],
    }  # fmt: skip


def ledger_rows() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rejects = [
        {
            "dataset": "jms_receive_attempts",
            "source_file": "landing/jms/a.jsonl",
            "record_number": 7,
            "field": "outcome",
            "reason": "outcome 'bogus' is not an outcome",
            "original_text": '{"outcome": "bogus"}',
            "_ingested_at": ts("12:00"),
            "_batch_id": "b1",
        },
    ]
    ledger = [
        {"content_hash": "a" * 64, "dataset": "ssb_receive_attempts",
         "source_file": "landing/ssb_receive_attempts/a.jsonl", "file_bytes": 1024,
         "loaded_records": 6, "rejected_records": 0, "_ingested_at": ts("12:00"),
         "_batch_id": "b1"},
    ]  # fmt: skip
    return rejects, ledger


MART_TYPES: dict[str, dict[str, str]] = {
    "poison_messages": {
        "message_key": "string", "broker_kind": "string", "server_name": "string",
        "database_name": "string", "broker_name": "string", "queue_name": "string",
        "conversation_handle": "string", "conversation_group_id": "string",
        "message_sequence_number": "bigint", "message_id": "string", "address": "string",
        "orig_address": "string", "orig_queue": "string", "message_type_name": "string",
        "consumer_id": "string", "attempt_count": "bigint", "failure_count": "bigint",
        "consecutive_failure_count": "bigint", "whole_transaction_rollback_count": "bigint",
        "distinct_error_count": "bigint", "delivery_count": "int",
        "first_failed_at": "timestamp", "last_failed_at": "timestamp",
        "last_attempted_at": "timestamp", "last_outcome": "string", "last_error_key": "string",
        "last_error_message": "string", "failure_class": "string", "classification": "string",
        "reason": "string", "failure_threshold": "int", "policy_action": "string",
        "is_live": "boolean", "is_conversation_ended": "boolean",
        "is_dead_lettered": "boolean", "has_out_of_order_processing": "boolean",
    },
    "poison_conversations": {
        "conversation_key": "string", "server_name": "string", "database_name": "string",
        "queue_name": "string", "conversation_handle": "string",
        "conversation_group_id": "string", "poison_message_count": "bigint",
        "first_poison_sequence_number": "bigint", "blocked_message_count": "bigint",
        "messages_discarded_on_end": "bigint", "is_live": "boolean",
        "latest_snapshot_at": "timestamp", "policy_action": "string", "error_code": "int",
        "error_description": "string",
    },
    "queue_health": {
        "queue_health_key": "string", "broker_kind": "string", "server_name": "string",
        "database_name": "string", "broker_name": "string", "queue_name": "string",
        "snapshot_at": "timestamp", "is_latest_snapshot": "boolean", "message_count": "bigint",
        "oldest_message_age_seconds": "bigint", "poison_message_count": "bigint",
        "current_rollback_run": "int", "longest_rollback_run": "int",
        "is_poison_message_handling_enabled": "boolean",
        "disable_risk": "string", "is_observed_disabled": "boolean", "is_disabled": "boolean",
    },
    "consumer_circuit_breakers": {
        "consumer_id": "string", "breaker_mode": "string", "max_consecutive_failures": "int",
        "same_type_threshold": "int", "scheduled_group": "string", "on_trip": "string",
        "longest_same_type_run": "int", "longest_any_type_run": "int",
        "same_type_exception_class": "string", "reporting_server_count": "int",
        "reporting_servers": "string", "server_count": "int", "is_tripped": "boolean",
        "trip_reason": "string", "is_disabled_by_apply": "boolean",
    },
    "dlq_messages": {
        "dlq_message_key": "string", "broker_kind": "string", "broker_name": "string",
        "message_id": "string", "queue_name": "string", "orig_address": "string",
        "orig_queue": "string", "reason": "string", "delivery_count": "int",
        "failure_class": "string", "is_in_dlq_snapshot": "boolean",
        "is_dead_lettered_by_apply": "boolean", "first_seen_at": "timestamp",
        "body_preview": "string", "is_replay_candidate": "boolean",
    },
    "failure_groups": {
        "failure_group_id": "string", "broker_kind": "string", "error_key": "string",
        "failure_class": "string", "normalized_message": "string", "example_message": "string",
        "failure_count": "bigint", "message_count": "bigint", "queue_count": "bigint",
        "first_seen_at": "timestamp", "last_seen_at": "timestamp",
    },
    "remediation_actions": {
        "action_id": "string", "action_type": "string", "broker_kind": "string",
        "server_name": "string", "database_name": "string", "broker_name": "string",
        "queue_name": "string", "conversation_handle": "string",
        "message_sequence_number": "bigint", "message_id": "string", "orig_address": "string",
        "orig_queue": "string", "consumer_id": "string", "scheduled_group": "string",
        "reason": "string", "policy_name": "string", "statement": "string",
        "collateral_message_count": "bigint", "requires_review": "boolean",
        "due_at": "timestamp", "sequence_in_script": "int", "status": "string",
        "applied_at": "timestamp", "run_id": "string",
    },
}  # fmt: skip


def mart_rows() -> dict[str, list[dict[str, Any]]]:
    sb = {
        "broker_kind": "service_broker",
        **SB,
        "message_type_name": "//Adventure-Works.com/Expenses/SubmitExpense",
        "is_live": True,
        "is_conversation_ended": False,
        "is_dead_lettered": False,
    }
    return {
        "poison_messages": [
            {**sb, "message_key": "k1", "conversation_handle": H1, "conversation_group_id": G1,
             "message_sequence_number": 0, "attempt_count": 3, "failure_count": 2,
             "consecutive_failure_count": 0, "whole_transaction_rollback_count": 2,
             "distinct_error_count": 1, "first_failed_at": ts("10:01"),
             "last_failed_at": ts("10:02"), "last_attempted_at": ts("10:03"),
             "last_outcome": "committed", "last_error_key": "1205",
             "failure_class": "transient", "classification": "recovered",
             "reason": "succeeded_after_failures", "failure_threshold": 3,
             "policy_action": "end_conversation"},
            {**sb, "message_key": "k2", "conversation_handle": H2, "conversation_group_id": G2,
             "message_sequence_number": 0, "attempt_count": 2, "failure_count": 2,
             "consecutive_failure_count": 2, "whole_transaction_rollback_count": 0,
             "distinct_error_count": 1, "first_failed_at": ts("10:04"),
             "last_failed_at": ts("10:05"), "last_attempted_at": ts("10:05"),
             "last_outcome": "rolled_back_to_savepoint", "last_error_key": "2627",
             "failure_class": "permanent", "classification": "poison",
             "reason": "permanent_error", "failure_threshold": 3,
             "policy_action": "end_conversation"},
            {"message_key": "k3", "broker_kind": "jms", **JMS, "message_id": "ID:msg-1",
             "consumer_id": "agent.orders", "attempt_count": 3, "failure_count": 2,
             "consecutive_failure_count": 0, "whole_transaction_rollback_count": 0,
             "distinct_error_count": 1, "delivery_count": 3, "first_failed_at": ts("10:10"),
             "last_failed_at": ts("10:11"), "last_attempted_at": ts("10:12"),
             "last_outcome": "acknowledged", "last_error_key": "java.net.ConnectException",
             "failure_class": "transient", "classification": "recovered",
             "reason": "succeeded_after_failures", "failure_threshold": 10,
             "policy_action": "dead_letter", "is_live": True, "is_conversation_ended": False,
             "is_dead_lettered": False, "has_out_of_order_processing": False},
        ],
        "poison_conversations": [
            {"conversation_key": "c2", **SB, "conversation_handle": H2,
             "conversation_group_id": G2, "poison_message_count": 1,
             "first_poison_sequence_number": 0, "blocked_message_count": 0,
             "messages_discarded_on_end": 2, "is_live": True, "latest_snapshot_at": ts("11:00"),
             "policy_action": "end_conversation", "error_code": 500,
             "error_description": "Unable to process message."},
        ],
        "queue_health": [
            {"queue_health_key": f"q{i}", "broker_kind": "service_broker", **SB,
             "snapshot_at": ts(at), "is_latest_snapshot": at == "11:00", "message_count": n,
             "oldest_message_age_seconds": 60, "poison_message_count": p,
             "current_rollback_run": 0, "longest_rollback_run": 2,
             "is_poison_message_handling_enabled": True, "disable_risk": "ok",
             "is_observed_disabled": False, "is_disabled": False}
            for i, (at, n, p) in enumerate([("10:00", 1, 0), ("11:00", 2, 1)])
        ],
        "consumer_circuit_breakers": [
            {"consumer_id": "agent.orders", "breaker_mode": "MANY",
             "max_consecutive_failures": 10, "same_type_threshold": 3,
             "on_trip": "disable_consumer", "longest_same_type_run": 2, "longest_any_type_run": 2,
             "same_type_exception_class": "java.net.ConnectException",
             "reporting_server_count": 0, "server_count": 1, "is_tripped": False,
             "is_disabled_by_apply": False},
        ],
        "dlq_messages": [
            {"dlq_message_key": "d9", "broker_kind": "jms", "broker_name": "artemis-1",
             "message_id": "ID:msg-9", "queue_name": "DLQ", "orig_address": "orders",
             "orig_queue": "orders", "reason": "max_deliveries", "delivery_count": 10,
             "failure_class": "transient", "is_in_dlq_snapshot": True,
             "is_dead_lettered_by_apply": False, "first_seen_at": ts("11:00"),
             "body_preview": "{}", "is_replay_candidate": True},
        ],
        "failure_groups": [
            {"failure_group_id": "f1", "broker_kind": "service_broker", "error_key": "1205",
             "failure_class": "transient", "normalized_message": "deadlock victim",
             "example_message": "deadlock victim", "failure_count": 2, "message_count": 1,
             "queue_count": 1, "first_seen_at": ts("10:01"), "last_seen_at": ts("10:02")},
            {"failure_group_id": "f2", "broker_kind": "service_broker", "error_key": "2627",
             "failure_class": "permanent", "normalized_message": "duplicate key",
             "example_message": "duplicate key", "failure_count": 2, "message_count": 1,
             "queue_count": 1, "first_seen_at": ts("10:04"), "last_seen_at": ts("10:05")},
        ],
        "remediation_actions": [
            {"action_id": "r1", "action_type": "end_conversation",
             "broker_kind": "service_broker", **SB, "conversation_handle": H2,
             "message_sequence_number": 0, "reason": "permanent_error",
             "policy_name": "service_broker_default",
             "statement": f"END CONVERSATION '{H2}' WITH ERROR = 500 "
             "DESCRIPTION = N'Unable to process message.'",
             "collateral_message_count": 1, "requires_review": False,
             "sequence_in_script": 1, "status": "pending"},
        ],
    }  # fmt: skip


def insert_rows(spark: Any, table: str, rows: list[dict[str, Any]]) -> None:
    """Append dict rows to an existing table (missing keys are null)."""
    schema = spark.table(table).schema
    tuples = [tuple(row.get(f.name) for f in schema.fields) for row in rows]
    spark.createDataFrame(tuples, schema=schema).write.insertInto(table)


def create_table(spark: Any, table: str, types: dict[str, str], rows: list[dict[str, Any]]) -> None:
    ddl = ", ".join(f"`{name}` {type_}" for name, type_ in types.items())
    spark.sql(f"drop table if exists {table}")
    spark.sql(f"create table {table} ({ddl}) using parquet")
    insert_rows(spark, table, rows)


def copy_database(spark: Any, source: str, target: str) -> None:
    """A copy of every table of `source` in `target` (CTAS), so a defect leaves the clean data."""
    spark.sql(f"drop database if exists `{target}` cascade")
    spark.sql(f"create database `{target}`")
    for row in spark.sql(f"show tables in `{source}`").collect():
        if row.isTemporary:
            continue
        spark.sql(
            f"create table `{target}`.`{row.tableName}` using parquet "
            f"as select * from `{source}`.`{row.tableName}`"
        )


# ---------------------------------------------------------------------------------------------
# Fixtures


# A store of this module's own: POISONWATCH_HOME is set before Spark starts.
store = store_fixture("checks")


@pytest.fixture(scope="module")
def engine(store: Path) -> Iterator[Any]:
    """One SparkSession for the module, with clean raw tables and stand-in marts."""
    from poisonwatch.warehouse.engine import connect

    with connect("local") as eng:
        spark = eng.spark
        create_raw_tables(eng)
        for name, rows in raw_rows().items():
            insert_rows(spark, f"{RAW_DATABASE}.{name}", [{**r, "_batch_id": "b1"} for r in rows])
        rejects, ledger = ledger_rows()
        insert_rows(spark, f"{RAW_DATABASE}.raw_rejects", rejects)
        insert_rows(spark, f"{RAW_DATABASE}.ingested_files", ledger)
        spark.sql(f"create database if not exists {MARTS}")
        for name, rows in mart_rows().items():
            create_table(spark, f"{MARTS}.{name}", MART_TYPES[name], rows)
        yield eng
    config.stop_spark()
    config.release_store_lock()


@pytest.fixture(autouse=True)
def _home(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # config.home() re-exports POISONWATCH_HOME; keep each test on this module's store.
    monkeypatch.setenv("POISONWATCH_HOME", str(store))


def run(engine: Any, suite: str, **kw: Any) -> checks.CheckReport:
    databases = {"marts": MARTS, **kw.pop("databases", {})}
    return checks.run_checks(engine, suite, databases=databases, **kw)


def failed(report: checks.CheckReport, suite: str) -> list[tuple[str, str, str]]:
    """(expectation type, columns, description) of each failed expectation of a suite."""
    return [(e.expectation, e.columns, e.description) for e in report.suite(suite).failures()]


# ---------------------------------------------------------------------------------------------
# Suite definitions (no Spark)


def test_suites_load_and_cover_both_layers() -> None:
    suites = checks.load_suites()
    layers = {s.layer for s in suites}
    assert layers == {"raw", "marts"}
    for dataset in DATASETS:
        assert f"raw_{dataset}" in {s.name for s in suites}, f"no suite for raw.{dataset}"
    for suite in suites:
        assert suite.expectations, f"{suite.name} has no expectations"
        assert all(e.get("description") for e in suite.expectations), suite.name


def test_raw_suites_follow_the_landing_contract() -> None:
    """Every required column is expected non-null, every enum's set is the contract's, every
    GUID column has the GUID regex: the JSON suites cannot drift from schemas.py silently."""
    by_name = {s.name: s for s in checks.load_suites()}
    for dataset in DATASETS.values():
        expectations = by_name[f"raw_{dataset.name}"].expectations
        unconditional = [e for e in expectations if "row_condition" not in e["kwargs"]]

        def has(kind: str, column: str, pool: list[dict[str, Any]] = unconditional) -> list[Any]:
            return [e for e in pool if e["type"] == kind and e["kwargs"].get("column") == column]

        for column in dataset.columns:
            if column.required:
                assert has("expect_column_values_to_not_be_null", column.name), column
            if column.enum:
                sets = has("expect_column_values_to_be_in_set", column.name)
                assert [sorted(e["kwargs"]["value_set"]) for e in sets] == [sorted(column.enum)]
            if column.guid:
                assert has("expect_column_values_to_match_regex", column.name), column


def test_selecting_suites() -> None:
    suites = checks.load_suites()
    assert {s.layer for s in checks.select_suites(suites, "marts")} == {"marts"}
    assert [s.name for s in checks.select_suites(suites, "raw_freshness")] == ["raw_freshness"]
    picked = checks.select_suites(suites, "raw_jms_*,marts_reconciliation")
    assert {s.name for s in picked} == {
        "raw_jms_receive_attempts",
        "raw_jms_queue_snapshots",
        "raw_jms_address_settings",
        "raw_jms_activations",
        "marts_reconciliation",
    }
    with pytest.raises(config.PoisonwatchError, match="no suite matches 'nope'"):
        checks.select_suites(suites, "nope")


# ---------------------------------------------------------------------------------------------
# Clean data passes


def test_every_suite_passes_on_clean_data(engine: Any, store: Path) -> None:
    report = run(engine, None)
    problems = {
        s.name: s.reason or [(e.description, e.columns, e.observed) for e in s.failures()]
        for s in report.suites
        if s.status != "passed"
    }
    assert not problems
    assert report.success and report.complete
    assert report.exit_code(require_all=True) == 0
    raw = [s for s in report.suites if s.layer == "raw"]
    assert all(s.rows for s in raw), [(s.name, s.rows) for s in raw]
    assert report.docs_index is not None and report.docs_index.is_file()
    assert report.docs_index.is_relative_to(store)
    html = report.docs_index.read_text()
    assert "raw_ssb_receive_attempts" in html and "marts_poison_messages" in html


def test_missing_marts_are_skipped_with_the_next_step(engine: Any) -> None:
    report = run(engine, "marts", databases={"marts": "no_marts_here"})
    assert report.success and report.exit_code() == 0
    # A skipped suite proves nothing: --require-all (make test) fails on it.
    assert not report.complete and report.exit_code(require_all=True) == 1
    assert {s.status for s in report.suites} == {"skipped"}
    assert all("run `dbt build` first" in s.reason for s in report.suites)
    assert "no_marts_here.poison_messages" in report.suite("marts_poison_messages").reason


def test_other_targets_are_refused_clearly(engine: Any) -> None:
    class Thrift:
        target = "cluster"

    with pytest.raises(config.PoisonwatchError, match="local SparkSession"):
        checks.run_checks(Thrift(), "raw")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# Deliberate defects, each in a copy of the data


def test_outcome_out_of_enum_fails_and_the_command_exits_non_zero(
    engine: Any, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from poisonwatch.cli import main

    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_outcome")
    bad = {**raw_rows()["ssb_receive_attempts"][2], "outcome": "rolled_forward", "attempt_id": "x"}
    insert_rows(spark, "raw_defect_outcome.ssb_receive_attempts", [bad])

    monkeypatch.setenv("COLUMNS", "200")
    argv = ["check", "--suite", "raw_ssb_receive_attempts"]
    code = main([*argv, "--raw-database", "raw_defect_outcome"])
    out = capsys.readouterr().out
    assert code == 1
    assert "raw_ssb_receive_attempts" in out and "FAILED" in out
    assert "expect_column_values_to_be_in_set" in out
    assert "outcome is one of committed" in out and "'rolled_forward'" in out
    # The same data without the defect passes: the failure is the defect's.
    assert main(argv) == 0


def test_outcome_out_of_enum_names_expectation_and_column(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_outcome2")
    bad = {**raw_rows()["jms_receive_attempts"][2], "outcome": "committed"}
    insert_rows(spark, "raw_defect_outcome2.jms_receive_attempts", [bad])
    report = run(engine, "raw_jms_receive_attempts", databases={"raw": "raw_defect_outcome2"})
    assert not report.success
    assert failed(report, "raw_jms_receive_attempts") == [
        (
            "expect_column_values_to_be_in_set",
            "outcome",
            "outcome is one of acknowledged, rolled_back, temporarily_unavailable",
        )
    ]
    (outcome,) = report.suite("raw_jms_receive_attempts").failures()
    assert outcome.observed == "1 of 4 rows unexpected" and "'committed'" in outcome.examples


def test_activation_repeated_on_one_server_fails(engine: Any) -> None:
    """An activation is (consumer, server, activation id): the clean data has act-1 on two
    servers and passes; act-1 twice on APP01 for the same consumer fails."""
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_activation")
    again = {**raw_rows()["jms_activations"][0], "status": "failed"}
    insert_rows(spark, "raw_defect_activation.jms_activations", [again])
    report = run(engine, "raw_jms_activations", databases={"raw": "raw_defect_activation"})
    assert [f[0] for f in failed(report, "raw_jms_activations")] == [
        "expect_compound_columns_to_be_unique"
    ]


def test_delivery_count_zero_fails(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_delivery")
    bad = {**raw_rows()["jms_receive_attempts"][0], "delivery_count": 0, "message_id": "ID:m0"}
    insert_rows(spark, "raw_defect_delivery.jms_receive_attempts", [bad])
    report = run(engine, "raw_jms_receive_attempts", databases={"raw": "raw_defect_delivery"})
    assert failed(report, "raw_jms_receive_attempts") == [
        (
            "expect_column_values_to_be_between",
            "delivery_count",
            "delivery_count (JMSXDeliveryCount) is at least 1 on a delivery",
        )
    ]


def test_malformed_handle_and_future_attempt_fail(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_handle")
    good = raw_rows()["ssb_receive_attempts"][5]
    insert_rows(
        spark,
        "raw_defect_handle.ssb_receive_attempts",
        [
            {**good, "conversation_handle": H3.lower(), "attempt_id": "lower"},
            {**good, "attempted_at": ts("10:00", day="2099-01-01"), "attempt_id": "future"},
        ],
    )
    report = run(engine, "raw_ssb_receive_attempts", databases={"raw": "raw_defect_handle"})
    assert sorted(failed(report, "raw_ssb_receive_attempts")) == [
        ("expect_column_values_to_be_between", "attempted_at", "attempted_at is not in the future"),
        (
            "expect_column_values_to_match_regex",
            "conversation_handle",
            "conversation_handle is a GUID, upper-case",
        ),
    ]


def test_attempt_before_enqueue_time_fails(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_timing")
    early = {**raw_rows()["ssb_receive_attempts"][0], "attempted_at": ts("09:30")}
    insert_rows(spark, "raw_defect_timing.ssb_receive_attempts", [{**early, "attempt_id": "e"}])
    report = run(engine, "raw_attempt_timing", databases={"raw": "raw_defect_timing"})
    assert failed(report, "raw_attempt_timing") == [
        (
            "expect_column_pair_values_a_to_be_greater_than_b",
            "attempted_at, enqueued_at",
            "an attempt is not before its message's enqueue time",
        )
    ]


def test_stale_snapshots_fail_freshness(engine: Any) -> None:
    # Clean data: the newest SSB attempt is 10:06 and the latest snapshot 11:00 (0.04 days).
    assert run(engine, "raw_freshness", freshness_days=0.05).success
    report = run(engine, "raw_freshness", freshness_days=0.01)
    assert failed(report, "raw_freshness") == [
        (
            "expect_column_values_to_be_between",
            "snapshot_gap_days",
            "the latest snapshot is within freshness_days of the newest attempt",
        )
    ]


def test_poison_message_without_reason_fails(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, MARTS, "marts_defect_reason")
    spark.sql(
        "insert overwrite table marts_defect_reason.poison_messages "
        "select * from checks_marts.poison_messages where message_key <> 'k2'"
    )
    no_reason = {**mart_rows()["poison_messages"][1], "reason": None}
    insert_rows(spark, "marts_defect_reason.poison_messages", [no_reason])
    report = run(engine, "marts_poison_messages", databases={"marts": "marts_defect_reason"})
    assert sorted(failed(report, "marts_poison_messages")) == [
        (
            "expect_column_values_to_not_be_null",
            "reason",
            "every message has a reason for its classification",
        ),
        ("expect_column_values_to_not_be_null", "reason", "every poison message has a reason"),
    ]
    poison = [
        e
        for e in report.suite("marts_poison_messages").failures()
        if e.description == "every poison message has a reason"
    ]
    assert poison[0].condition == "classification == 'poison'"
    assert poison[0].observed == "1 of 1 rows unexpected"


def test_classification_inconsistent_with_counts_fails(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, MARTS, "marts_defect_counts")
    wrong = {
        **mart_rows()["poison_messages"][1],
        "message_key": "k9",
        "reason": "threshold_exceeded",
        "failure_class": "transient",
        "message_sequence_number": 9,
    }
    recovered_but_failed = {
        **mart_rows()["poison_messages"][0],
        "message_key": "k8",
        "last_outcome": "rolled_back",
        "message_sequence_number": 8,
    }
    insert_rows(spark, "marts_defect_counts.poison_messages", [wrong, recovered_but_failed])
    report = run(engine, "marts_poison_messages", databases={"marts": "marts_defect_counts"})
    assert sorted(failed(report, "marts_poison_messages")) == [
        (
            "expect_column_pair_values_a_to_be_greater_than_b",
            "failure_count, failure_threshold",
            "threshold_exceeded means failures > failure_threshold (rules.md 5)",
        ),
        (
            "expect_column_values_to_be_in_set",
            "last_outcome",
            "recovered means the latest attempt succeeded",
        ),
    ]


def test_tripped_breaker_without_reason_fails(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, MARTS, "marts_defect_breaker")
    tripped = {
        **mart_rows()["consumer_circuit_breakers"][0],
        "consumer_id": "agent.billing",
        "breaker_mode": "ANY",
        "is_tripped": True,
        "longest_same_type_run": 3,
        "longest_any_type_run": 3,
        "reporting_server_count": 1,
    }
    insert_rows(spark, "marts_defect_breaker.consumer_circuit_breakers", [tripped])
    report = run(
        engine, "marts_consumer_circuit_breakers", databases={"marts": "marts_defect_breaker"}
    )
    assert failed(report, "marts_consumer_circuit_breakers") == [
        ("expect_column_values_to_not_be_null", "trip_reason", "every tripped breaker has a reason")
    ]


def test_message_lost_between_layers_fails_reconciliation(engine: Any) -> None:
    spark = engine.spark
    copy_database(spark, MARTS, "marts_defect_lost")
    spark.sql(
        "insert overwrite table marts_defect_lost.poison_messages "
        "select * from checks_marts.poison_messages where message_key <> 'k3'"
    )
    report = run(engine, "marts_reconciliation", databases={"marts": "marts_defect_lost"})
    assert sorted(failed(report, "marts_reconciliation")) == [
        (
            "expect_column_pair_values_to_be_equal",
            "jms_failed_messages_in_raw, jms_failed_messages_found_in_poison_messages",
            "each failed JMS message of raw is found in poison_messages by its identity",
        ),
        (
            "expect_column_pair_values_to_be_equal",
            "jms_failed_messages_in_raw, jms_rows_in_poison_messages",
            "every failed JMS message in raw is one row of poison_messages, and no other",
        ),
    ]


def test_data_docs_show_the_latest_run(engine: Any, store: Path) -> None:
    """The site under $POISONWATCH_HOME/data_docs has the suite and its validation result."""
    report = run(engine, "raw_ingested_files")
    assert report.docs_index == store / "data_docs" / "index.html"
    site = store / "data_docs"
    suites = list((site / "expectations").rglob("*.html"))
    results = list((site / "validations").rglob("*.html"))
    assert [p.stem for p in suites] == ["raw_ingested_files"]
    assert len(results) == 1
    assert "content_hash" in results[0].read_text()


HIJACK = (
    "[bold red]HIJACK[/bold red] \x1b[2J <script>alert(1)</script> "
    '=HYPERLINK("http://evil.example","x") \u202eevil'
)


def test_hostile_values_are_inert_in_the_report_and_data_docs(engine: Any, store: Path) -> None:
    """An unexpected value quoting markup, an ANSI sequence, HTML and a bidi override is shown
    as text in the terminal report and escaped in the Data Docs page GX writes."""
    spark = engine.spark
    copy_database(spark, RAW_DATABASE, "raw_defect_hostile")
    bad = {**raw_rows()["ssb_receive_attempts"][2], "outcome": HIJACK, "attempt_id": "hostile"}
    insert_rows(spark, "raw_defect_hostile.ssb_receive_attempts", [bad])
    report = run(engine, "raw_ssb_receive_attempts", databases={"raw": "raw_defect_hostile"})
    assert not report.success
    buffer = io.StringIO()
    checks.print_report(report, console=Console(file=buffer, width=400))
    out = buffer.getvalue()
    assert "\x1b" not in out and "\u202e" not in out
    assert "[bold red]HIJACK" in out  # printed, not interpreted
    pages = list((store / "data_docs" / "validations").rglob("*.html"))
    html = "\n".join(p.read_text() for p in pages)
    assert "HIJACK" in html
    # (a raw ESC inside HTML text is inert in a browser; the HTML itself must not be)
    assert "&lt;script&gt;alert(1)" in html
    assert "<script>alert(1)" not in html
