"""A small, hand-made workload for the remediation tests: one of every action type.

Written straight into the raw tables (the ingest's contract, `schemas.DATASETS`) with Spark SQL,
so the tests do not depend on the generator. Names and ids include hostile text (quotes, `]`,
`'; DROP TABLE x;--`, Unicode) to prove that nothing from the data reaches a statement unquoted.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from poisonwatch.schemas import DATASETS, LINEAGE_COLUMNS, RAW_DATABASE, create_raw_tables

T0 = dt.datetime(2026, 11, 20, 8, 0, 0)
HOSTILE = "'; DROP TABLE x;--"

SERVER = "SQL1"
DATABASE = "AdventureWorks"
QUEUE = "dbo.ExpenseQueue"
HOSTILE_DATABASE = "Ünïcødé'DB]"
HOSTILE_QUEUE = "dbo.Q]" + HOSTILE
# Conversations (upper-case GUIDs, as rules.md stores them).
HANDLE_DISABLER = "A0000000-0000-4000-8000-00000000000A"  # 5 whole-transaction rollbacks
HANDLE_SUSPECT = "B0000000-0000-4000-8000-00000000000B"  # at the threshold
HANDLE_THRESHOLD = "C0000000-0000-4000-8000-00000000000C"  # over the threshold
HANDLE_DISPOSABLE = "D0000000-0000-4000-8000-00000000000D"  # a progress report
HANDLE_HOSTILE = "E0000000-0000-4000-8000-00000000000E"  # on the hostile queue
PROGRESS_REPORT = "//Adventure-Works.com/Expenses/ProgressReport"
EXPENSE = "//Adventure-Works.com/Expenses/SubmitExpense"

BROKER = "artemis1"
JMS_ADDRESS = "orders"
JMS_QUEUE = "orders.agent"
JMS_POISON_IDS = ("ID:m1", "ID:it's" + HOSTILE + " ☃")
DLQ_MESSAGE_ID = "ID:d1"
NIGHTLY = ("agent.nightly-export", "agent.nightly-cleanup", "agent.nightly-archive")


def sql_literal(value: Any) -> str:
    """A Spark SQL literal for a Python value (strings with backslash escapes)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dt.datetime):
        return f"timestamp'{value.isoformat(sep=' ')}'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{text}'"


def _insert(engine: Any, dataset: str, rows: list[dict[str, Any]]) -> None:
    if not rows:
        return
    columns = [*DATASETS[dataset].column_names, *(c.name for c in LINEAGE_COLUMNS)]
    values = []
    for number, row in enumerate(rows, start=1):
        full = dict(row)
        full.update(
            _source_file=f"fixture/{dataset}.jsonl",
            _record_number=number,
            _ingested_at=T0,
            _batch_id="fixture",
        )
        values.append("(" + ", ".join(sql_literal(full.get(c)) for c in columns) + ")")
    engine.execute(
        f"insert into `{RAW_DATABASE}`.`{dataset}` ({', '.join(columns)}) values "
        + ", ".join(values)
    )


def _minutes(n: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n)


def load_fixture(engine: Any) -> None:
    """Create the raw tables (empty) if missing and insert the fixture workload."""
    create_raw_tables(engine)
    sb: list[dict[str, Any]] = []
    snap: list[dict[str, Any]] = []

    def attempt(minute: float, handle: str, seq: int, outcome: str, error: int | None, **kw: Any):
        sb.append(
            dict(
                attempted_at=_minutes(minute),
                server_name=kw.get("server", SERVER),
                database_name=kw.get("database", DATABASE),
                queue_name=kw.get("queue", QUEUE),
                conversation_group_id=handle.replace("0000-4000", "1111-4111"),
                conversation_handle=handle,
                message_sequence_number=seq,
                message_type_name=kw.get("type", EXPENSE),
                outcome=outcome,
                error_number=error,
                error_message=None if error is None else f"error {error}: it's {HOSTILE}",
                reader="reader-1",
                attempt_id=f"{handle}-{seq}-{minute}",
            )
        )

    # B: three savepoint rollbacks (transient) = failure_threshold: suspect -> inspect_message.
    for i in range(3):
        attempt(1 + i, HANDLE_SUSPECT, 1, "rolled_back_to_savepoint", 1205)
    # C: four savepoint rollbacks > threshold: poison -> end_conversation.
    for i in range(4):
        attempt(5 + i, HANDLE_THRESHOLD, 1, "rolled_back_to_savepoint", 1205)
    # D: a progress report failing once: disposable -> discard.
    attempt(10, HANDLE_DISPOSABLE, 1, "rolled_back_to_savepoint", 1205, type=PROGRESS_REPORT)
    # Hostile queue: four failures -> end_conversation on a queue whose name needs quoting.
    for i in range(4):
        attempt(
            11 + i,
            HANDLE_HOSTILE,
            1,
            "rolled_back_to_savepoint",
            1205,
            database=HOSTILE_DATABASE,
            queue=HOSTILE_QUEUE,
        )
    # A: five whole-transaction rollbacks (duplicate key, permanent): the queue is disabled.
    for i in range(5):
        attempt(20 + i, HANDLE_DISABLER, 1, "rolled_back", 2627)

    snapshot_at = _minutes(30)

    def in_queue(handle: str, seq: int, **kw: Any) -> None:
        snap.append(
            dict(
                snapshot_at=snapshot_at,
                server_name=SERVER,
                database_name=kw.get("database", DATABASE),
                queue_name=kw.get("queue", QUEUE),
                status=1,
                priority=5,
                queuing_order=len(snap),
                conversation_group_id=handle.replace("0000-4000", "1111-4111"),
                conversation_handle=handle,
                message_sequence_number=seq,
                service_name="ExpenseService",
                service_contract_name="ExpenseContract",
                message_type_name=kw.get("type", EXPENSE),
                validation="X",
                message_body="PABhAD4A",
                message_enqueue_time=T0,
            )
        )

    for seq in (1, 2, 3):
        in_queue(HANDLE_DISABLER, seq)
    for seq in (1, 2):
        in_queue(HANDLE_THRESHOLD, seq)
    in_queue(HANDLE_SUSPECT, 1)
    in_queue(HANDLE_DISPOSABLE, 1, type=PROGRESS_REPORT)
    in_queue(HANDLE_HOSTILE, 1, database=HOSTILE_DATABASE, queue=HOSTILE_QUEUE)
    _insert(engine, "ssb_receive_attempts", sb)
    _insert(engine, "ssb_queue_snapshots", snap)
    _insert(
        engine,
        "ssb_queue_states",
        [
            dict(
                snapshot_at=snapshot_at,
                server_name=SERVER,
                database_name=DATABASE,
                queue_name=QUEUE,
                is_receive_enabled=False,
                is_enqueue_enabled=True,
                is_activation_enabled=True,
                is_poison_message_handling_enabled=True,
                activation_procedure="dbo.ProcessExpenseReport",
                max_readers=1,
            )
        ],
    )
    _insert(
        engine,
        "ssb_broker_events",
        [
            dict(
                event_time=_minutes(24.5),
                server_name=SERVER,
                database_name=DATABASE,
                queue_name=QUEUE,
                event_type="BROKER_QUEUE_DISABLED",
            )
        ],
    )

    jms: list[dict[str, Any]] = []

    def delivery(minute: float, message_id: str, count: int, outcome: str, exc: str | None, **kw):
        jms.append(
            dict(
                attempted_at=_minutes(minute),
                broker_name=BROKER,
                address=kw.get("address", JMS_ADDRESS),
                queue_name=kw.get("queue", JMS_QUEUE),
                message_id=message_id,
                correlation_id=None,
                group_id=None,
                delivery_count=count,
                redelivered=count > 1,
                orig_address=None,
                orig_queue=None,
                message_type="com.example.orders.Order",
                consumer_id=kw.get("consumer", "agent.orders"),
                server_name=kw.get("server", "app1"),
                activation_id=kw.get("activation"),
                outcome=outcome,
                exception_class=exc,
                exception_message=None if exc is None else f"failed: {HOSTILE}",
                stack_trace=None,
            )
        )

    # Two messages redelivered 10 times (transient errors): max_deliveries -> dead_letter.
    # Alternating servers keep agent.orders (mode MANY) from tripping.
    for n, message_id in enumerate(JMS_POISON_IDS):
        for i in range(10):
            delivery(
                40 + n * 20 + i,
                message_id,
                i + 1,
                "rolled_back",
                "java.net.ConnectException",
                server=f"app{1 + i % 2}",
            )
    # agent.nightly-export: three IllegalStateExceptions in a row in activation act-1
    # (it succeeded): the breaker trips (N = 3), the whole scheduled group is disabled, and the
    # activation's failure records are purged.
    for i in range(3):
        delivery(
            80 + i,
            f"ID:n{i}",
            1,
            "rolled_back",
            "java.lang.IllegalStateException",
            address="nightly",
            queue="nightly.export",
            consumer=NIGHTLY[0],
            activation="act-1",
        )
    delivery(
        84, "ID:c1", 1, "acknowledged", None, address="nightly", queue="nightly.cleanup",
        consumer=NIGHTLY[1], activation="act-2",
    )  # fmt: skip
    _insert(engine, "jms_receive_attempts", jms)
    _insert(
        engine,
        "jms_activations",
        [
            dict(
                activation_id="act-1",
                consumer_id=NIGHTLY[0],
                server_name="app1",
                started_at=_minutes(79),
                finished_at=_minutes(83),
                status="succeeded",
            ),
            dict(
                activation_id="act-9",
                consumer_id=NIGHTLY[0],
                server_name="app1",
                started_at=_minutes(90),
                finished_at=None,
                status="running",
            ),
        ],
    )
    _insert(
        engine,
        "jms_queue_snapshots",
        [
            dict(
                snapshot_at=_minutes(100),
                broker_name=BROKER,
                address="DLQ",
                queue_name="DLQ",
                message_id=DLQ_MESSAGE_ID,
                enqueued_at=_minutes(30),
                delivery_count=10,
                priority=4,
                group_id=None,
                orig_address=JMS_ADDRESS,
                orig_queue=JMS_QUEUE,
                message_type="com.example.orders.Order",
                body='{"order": 1}',
                properties='{"_AMQ_ORIG_QUEUE": "orders.agent"}',
            ),
            *(
                dict(
                    snapshot_at=_minutes(100),
                    broker_name=BROKER,
                    address=JMS_ADDRESS,
                    queue_name=JMS_QUEUE,
                    message_id=message_id,
                    enqueued_at=_minutes(39),
                    delivery_count=10,
                    priority=4,
                    group_id=None,
                    orig_address=None,
                    orig_queue=None,
                    message_type="com.example.orders.Order",
                    body='{"order": "' + message_id + '"}',
                    properties='{"JMSXDeliveryCount": 10}',
                )
                for message_id in JMS_POISON_IDS
            ),
        ],
    )
