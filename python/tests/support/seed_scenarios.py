"""The seeds' own examples as landing files (the landing contract, DESIGN.md), one scenario per
example with names of its own (server, queue, consumer), so that one ingest and one production
build hold them all without one scenario's attempts reaching another's rules.

Policies the shipped seeds do not have (an error code of 127, breakers with M = 8 and M = 20,
mode MANY for named consumers) are rows a user adds for one queue or consumer, as the README's
"Policies" section says; `write_policy_project` writes them into a copy of the project, so the
shipped seeds' rows stay exactly as shipped and still decide every other scenario.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

T0 = dt.datetime(2026, 11, 20, 8, 0, 0, tzinfo=dt.UTC)

# Seed 000: TrackMessage ends the conversation on the fourth failure, not the third.
SB000_SERVER = "SQL000"
SB000_DATABASE = "AdventureWorks"
SB000_QUEUE = "dbo.ExpenseQueue"
SB000_FOURTH = "00000000-0000-4000-8000-000000000004"
SB000_THIRD = "00000000-0000-4000-8000-000000000003"
EXPENSE = "//Adventure-Works.com/Expenses/SubmitExpense"

# Seed 001: the inspect script for each validation, and a policy ending with error 127.
SB001_SERVER = "SQL001"
SB001_DATABASE = "Inventory"
SB001_QUEUE = "dbo.InventoryQueue"
SB001_SUSPECT = {
    "E": "00100000-0000-4000-8000-00000000000E",
    "X": "00100000-0000-4000-8000-00000000000A",
    "N": "00100000-0000-4000-8000-00000000000B",
}
SB001_BODIES = {"E": None, "X": "<item id='42'/>", "N": b"\x00\x01\xfe\xff"}
SB001_127_QUEUE = "dbo.RetiredItemQueue"
SB001_127_HANDLE = "00100000-0000-4000-8000-000000000127"
INVENTORY = "//Inventory/RequestItem"

# Queue rollback runs: five whole-transaction rollbacks in all on one queue would disable it,
# but a committed attempt and an ended conversation each start the run again.
RESET_SERVER = "SQLRESET"
RESET_DATABASE = "Orders"
RESET_QUEUE = "dbo.ResetQueue"
# (minutes after T0, handle, outcome) in order; snapshots after each part.
RESET_HANDLES = {
    "a": "0EE00000-0000-4000-8000-00000000000A",
    "b": "0EE00000-0000-4000-8000-00000000000B",
    "c": "0EE00000-0000-4000-8000-00000000000C",
}
RESET_SNAPSHOTS = (10, 20, 30, 40, 50)  # minutes after T0

# Seed 002 retention: consumer → (activations, failure times). All on server app-ret.
RET_SERVER = "app-ret"
RET_BROKER = "artemis-ret"
RETENTION_DAYS = 7  # dbt_project.yml's failure_log_retention_days default (the var is unset)
RET_SUCCEEDED = "agent.retention-succeeded"
RET_FAILED = "agent.retention-failed"
RET_RUNNING_AFTER_SUCCEEDED = "agent.retention-running-after-succeeded"
RET_RUNNING_AFTER_FAILED = "agent.retention-running-after-failed"
# The last completed activation of the failed cases starts here.
RET_LAST_START = T0 - dt.timedelta(hours=1)

# Seed 002 fuse: breakers whose N = M/3 differs between truncation and rounding.
FUSE_SERVER = "app-fuse"
FUSE_BROKER = "artemis-fuse"
FUSE_M8_TRIPS = "agent.fuse-m8-two"  # M = 8: N = 2 (rounding would say 3)
FUSE_M8_ONE = "agent.fuse-m8-one"  # M = 8, one failure: no trip
FUSE_M20_TRIPS = "agent.fuse-m20-six"  # M = 20: N = 6 (rounding would say 7)
FUSE_M20_FIVE = "agent.fuse-m20-five"  # M = 20, five of one type: no trip
FUSE_M8_ANY_TYPES = "agent.fuse-m8-mixed"  # M = 8 failures of alternating types: trips on M
MODE_ANY = "agent.mode-any"  # the shipped `*` row: M = 10, ANY; one server reports
MODE_MANY_ONE = "agent.mode-many-one"  # MANY, only one server reports
MODE_MANY_TWO = "agent.mode-many-two"  # MANY, two servers report
MODE_SERVERS = ("app-m1", "app-m2")
NIGHTLY = ("agent.nightly-export", "agent.nightly-cleanup", "agent.nightly-archive")  # shipped

# JMS messages: first seen already at delivery_count 10 (and 9), and one still retrying.
JMS_BROKER = "artemis-jms"
JMS_SERVER = "app-jms"
JMS_ADDRESS = "inventory"
JMS_QUEUE = "inventory.agent"
JMS_CONSUMER = "agent.inventory"
JMS_FIRST_AT_10 = "ID:first-seen-at-10"
JMS_FIRST_AT_9 = "ID:first-seen-at-9"
JMS_RETRYING = "ID:retrying"
RETRY_QUEUE = "inventory.retry"
RETRY_CONSUMER = "agent.inventory-retry"

EXTRA_FAILURE_POLICIES = [
    # Seed 001's manual removal ends the conversation with error 127.
    f"retired_items,service_broker,{SB001_127_QUEUE},3,,1,true,end_conversation,127,"
    "Unable to process message.,,,,60",
]
EXTRA_CONSUMER_POLICIES = [
    f'{FUSE_M8_TRIPS},8,ANY,,"M = 8: N = M/3 truncated is 2.",',
    f'{FUSE_M8_ONE},8,ANY,,"M = 8.",',
    f'{FUSE_M8_ANY_TYPES},8,ANY,,"M = 8.",',
    f'{FUSE_M20_TRIPS},20,ANY,,"M = 20: N = M/3 truncated is 6.",',
    f'{FUSE_M20_FIVE},20,ANY,,"M = 20.",',
    f'{MODE_MANY_ONE},10,MANY,,"Mode MANY.",',
    f'{MODE_MANY_TWO},10,MANY,,"Mode MANY.",',
]


def iso(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def minutes(n: float) -> dt.datetime:
    return T0 + dt.timedelta(minutes=n)


class Landing:
    """Collects records per dataset and writes them as one `.jsonl` file each."""

    def __init__(self) -> None:
        self.records: dict[str, list[dict[str, Any]]] = {}

    def add(self, dataset: str, **record: Any) -> None:
        out = {k: iso(v) if isinstance(v, dt.datetime) else v for k, v in record.items()}
        self.records.setdefault(dataset, []).append(out)

    def write(self, folder: Path) -> dict[str, int]:
        for dataset, rows in self.records.items():
            (folder / dataset).mkdir(parents=True, exist_ok=True)
            with open(folder / dataset / "part-00000.jsonl", "w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return {dataset: len(rows) for dataset, rows in self.records.items()}


def _sb_attempt(
    land: Landing,
    at: dt.datetime,
    server: str,
    database: str,
    queue: str,
    handle: str,
    outcome: str,
    error: int | None = 1205,
    seq: int = 1,
    message_type: str = EXPENSE,
) -> None:
    land.add(
        "ssb_receive_attempts",
        attempted_at=at,
        server_name=server,
        database_name=database,
        queue_name=queue,
        conversation_group_id=handle.replace("-4000-", "-4111-"),
        conversation_handle=handle,
        message_sequence_number=seq,
        message_type_name=message_type,
        outcome=outcome,
        error_number=None if outcome in ("committed", "ended_conversation") else error,
        error_message=None if outcome in ("committed", "ended_conversation") else "deadlock",
        reader="reader-1",
        attempt_id=f"{server}/{handle}/{seq}/{iso(at)}",
    )


def _sb_in_queue(
    land: Landing,
    at: dt.datetime,
    server: str,
    database: str,
    queue: str,
    handle: str,
    validation: str = "X",
    body: str | bytes | None = "<expense/>",
    message_type: str = EXPENSE,
) -> None:
    raw = body.encode("utf-16-le") if isinstance(body, str) else body
    land.add(
        "ssb_queue_snapshots",
        snapshot_at=at,
        server_name=server,
        database_name=database,
        queue_name=queue,
        status=1,
        priority=5,
        queuing_order=len(land.records.get("ssb_queue_snapshots", [])),
        conversation_group_id=handle.replace("-4000-", "-4111-"),
        conversation_handle=handle,
        message_sequence_number=1,
        service_name="Service",
        service_contract_name="Contract",
        message_type_name=message_type,
        validation=validation,
        message_body=None if raw is None else base64.b64encode(raw).decode(),
        message_enqueue_time=T0,
    )


def _sb_state(land: Landing, at: dt.datetime, server: str, database: str, queue: str) -> None:
    land.add(
        "ssb_queue_states",
        snapshot_at=at,
        server_name=server,
        database_name=database,
        queue_name=queue,
        is_receive_enabled=True,
        is_enqueue_enabled=True,
        is_activation_enabled=True,
        is_poison_message_handling_enabled=True,
        activation_procedure="dbo.Activate",
        max_readers=1,
    )


def _jms_attempt(
    land: Landing,
    at: dt.datetime,
    consumer: str,
    server: str,
    outcome: str,
    exception: str | None = None,
    *,
    broker: str,
    queue: str,
    message_id: str,
    delivery_count: int = 1,
    activation: str | None = None,
) -> None:
    land.add(
        "jms_receive_attempts",
        attempted_at=at,
        broker_name=broker,
        address=queue.split(".")[0],
        queue_name=queue,
        message_id=message_id,
        correlation_id=None,
        group_id=None,
        delivery_count=delivery_count,
        redelivered=delivery_count > 1,
        orig_address=None,
        orig_queue=None,
        message_type="com.example.Document",
        consumer_id=consumer,
        server_name=server,
        activation_id=activation,
        outcome=outcome,
        exception_class=exception,
        exception_message=None if exception is None else "failed",
        stack_trace=None,
    )


def _activation(
    land: Landing,
    activation_id: str,
    consumer: str,
    started: dt.datetime,
    status: str,
) -> None:
    land.add(
        "jms_activations",
        activation_id=activation_id,
        consumer_id=consumer,
        server_name=RET_SERVER,
        started_at=started,
        finished_at=None if status == "running" else started + dt.timedelta(minutes=5),
        status=status,
    )


def _seed_000(land: Landing) -> None:
    where = (SB000_SERVER, SB000_DATABASE, SB000_QUEUE)
    for i in range(4):
        _sb_attempt(land, minutes(1 + i), *where, SB000_FOURTH, "rolled_back_to_savepoint")
    for i in range(3):
        _sb_attempt(land, minutes(6 + i), *where, SB000_THIRD, "rolled_back_to_savepoint")
    for handle in (SB000_FOURTH, SB000_THIRD):
        _sb_in_queue(land, minutes(15), *where, handle)
    _sb_state(land, minutes(15), *where)


def _seed_001(land: Landing) -> None:
    where = (SB001_SERVER, SB001_DATABASE, SB001_QUEUE)
    for n, (validation, handle) in enumerate(SB001_SUSPECT.items()):
        for i in range(3):
            _sb_attempt(
                land, minutes(1 + 4 * n + i), *where, handle, "rolled_back_to_savepoint",
                message_type=INVENTORY,
            )  # fmt: skip
        _sb_in_queue(
            land, minutes(20), *where, handle, validation, SB001_BODIES[validation], INVENTORY
        )
    _sb_state(land, minutes(20), *where)
    retired = (SB001_SERVER, SB001_DATABASE, SB001_127_QUEUE)
    for i in range(4):
        _sb_attempt(
            land, minutes(1 + i), *retired, SB001_127_HANDLE, "rolled_back_to_savepoint",
            message_type=INVENTORY,
        )  # fmt: skip
    _sb_in_queue(land, minutes(20), *retired, SB001_127_HANDLE, "X", "<item/>", INVENTORY)
    _sb_state(land, minutes(20), *retired)


def _rollback_reset(land: Landing) -> None:
    where = (RESET_SERVER, RESET_DATABASE, RESET_QUEUE)
    a, b, c = (RESET_HANDLES[k] for k in "abc")
    for i in range(4):  # run 4 at minute 10
        _sb_attempt(land, minutes(1 + i), *where, a, "rolled_back")
    _sb_attempt(land, minutes(15), *where, a, "committed")  # run 0 at minute 20
    for i in range(4):  # run 4 at minute 30
        _sb_attempt(land, minutes(21 + i), *where, b, "rolled_back")
    _sb_attempt(land, minutes(35), *where, b, "ended_conversation")  # run 0 at minute 40
    for i in range(3):  # run 3 at minute 50
        _sb_attempt(land, minutes(41 + i), *where, c, "rolled_back")
    for m in RESET_SNAPSHOTS:
        _sb_in_queue(land, minutes(m), *where, c)
        _sb_state(land, minutes(m), *where)


def retention_failures() -> dict[str, list[tuple[dt.datetime, str | None]]]:
    """Per retention consumer, its failed attempts: (time, activation id)."""
    boundary = RET_LAST_START - dt.timedelta(days=RETENTION_DAYS)
    minute = dt.timedelta(minutes=1)
    return {
        # Last completed activation succeeded: its own failures are purged, an older
        # activation's are not.
        RET_SUCCEEDED: [
            (T0 - dt.timedelta(days=2), "ok-1"),
            (T0 - dt.timedelta(minutes=50), "ok-2"),
            (T0 - dt.timedelta(minutes=49), "ok-2"),
        ],
        # Failed: older than N days before the last activation's start are purged.
        RET_FAILED: [
            (boundary - dt.timedelta(days=3), "f-0"),
            (boundary - minute, "f-0"),
            (boundary + minute, "f-1"),
            (RET_LAST_START + minute, "f-2"),
        ],
        RET_RUNNING_AFTER_SUCCEEDED: [
            (T0 - dt.timedelta(minutes=50), "rs-1"),
            (T0 - dt.timedelta(minutes=10), "rs-2"),
        ],
        RET_RUNNING_AFTER_FAILED: [
            (boundary - minute, "rf-0"),
            (boundary + minute, "rf-0"),
            # A running activation's start would put this boundary past every failure.
            (T0 - dt.timedelta(minutes=10), "rf-2"),
        ],
    }


def _retention(land: Landing) -> None:
    _activation(land, "ok-1", RET_SUCCEEDED, T0 - dt.timedelta(days=2, minutes=5), "failed")
    _activation(land, "ok-2", RET_SUCCEEDED, T0 - dt.timedelta(minutes=55), "succeeded")
    _activation(land, "f-0", RET_FAILED, RET_LAST_START - dt.timedelta(days=12), "failed")
    _activation(land, "f-1", RET_FAILED, RET_LAST_START - dt.timedelta(days=6), "succeeded")
    _activation(land, "f-2", RET_FAILED, RET_LAST_START, "failed")
    _activation(
        land, "rs-1", RET_RUNNING_AFTER_SUCCEEDED, T0 - dt.timedelta(minutes=55), "succeeded"
    )
    _activation(land, "rs-2", RET_RUNNING_AFTER_SUCCEEDED, T0 - dt.timedelta(minutes=15), "running")
    _activation(
        land, "rf-0", RET_RUNNING_AFTER_FAILED, RET_LAST_START - dt.timedelta(days=9), "failed"
    )
    _activation(land, "rf-1", RET_RUNNING_AFTER_FAILED, RET_LAST_START, "failed")
    _activation(land, "rf-2", RET_RUNNING_AFTER_FAILED, T0 - dt.timedelta(minutes=15), "running")
    for consumer, failures in retention_failures().items():
        for n, (at, activation) in enumerate(failures):
            # Alternating exception types with a success after each: no breaker trips here.
            _jms_attempt(
                land, at, consumer, RET_SERVER, "rolled_back",
                "java.net.ConnectException" if n % 2 else "java.net.SocketTimeoutException",
                broker=RET_BROKER, queue="retention.agent", message_id=f"ID:{consumer}-{n}",
                activation=activation,
            )  # fmt: skip
            _jms_attempt(
                land, at + dt.timedelta(seconds=1), consumer, RET_SERVER, "acknowledged",
                broker=RET_BROKER, queue="retention.agent", message_id=f"ID:{consumer}-{n}",
                delivery_count=2, activation=activation,
            )  # fmt: skip


def _failures(
    land: Landing,
    consumer: str,
    server: str,
    exceptions: list[str],
    start: float,
    broker: str = FUSE_BROKER,
) -> None:
    for i, exception in enumerate(exceptions):
        _jms_attempt(
            land, minutes(start + i), consumer, server, "rolled_back", exception,
            broker=broker, queue=f"{consumer}.queue", message_id=f"ID:{consumer}-{server}-{i}",
        )  # fmt: skip


ISE = "java.lang.IllegalStateException"
NPE = "java.lang.NullPointerException"


def _fuse(land: Landing) -> None:
    _failures(land, FUSE_M8_TRIPS, FUSE_SERVER, [ISE, ISE], 1)
    _failures(land, FUSE_M8_ONE, FUSE_SERVER, [ISE], 1)
    _failures(land, FUSE_M8_ANY_TYPES, FUSE_SERVER, [ISE, NPE] * 4, 1)
    _failures(land, FUSE_M20_TRIPS, FUSE_SERVER, [ISE] * 6, 1)
    _failures(land, FUSE_M20_FIVE, FUSE_SERVER, [ISE] * 5, 1)
    # Three of one type on one server make that server report (N = 3 for M = 10).
    _failures(land, MODE_ANY, MODE_SERVERS[0], [ISE] * 3, 1)
    _failures(land, MODE_ANY, MODE_SERVERS[1], [ISE], 1)
    _failures(land, MODE_MANY_ONE, MODE_SERVERS[0], [ISE] * 3, 1)
    _failures(land, MODE_MANY_ONE, MODE_SERVERS[1], [ISE], 1)
    _failures(land, MODE_MANY_TWO, MODE_SERVERS[0], [ISE] * 3, 1)
    _failures(land, MODE_MANY_TWO, MODE_SERVERS[1], [ISE] * 3, 1)
    # The shipped scheduled group `nightly`: one member trips, the others only succeed.
    _failures(land, NIGHTLY[0], FUSE_SERVER, [ISE] * 3, 1)
    for n, consumer in enumerate(NIGHTLY[1:]):
        _jms_attempt(
            land, minutes(1 + n), consumer, FUSE_SERVER, "acknowledged",
            broker=FUSE_BROKER, queue=f"{consumer}.queue", message_id=f"ID:{consumer}-ok",
        )  # fmt: skip


def _jms_messages(land: Landing) -> None:
    where = {"broker": JMS_BROKER, "queue": JMS_QUEUE}
    # The first attempt this log holds is already the tenth (or ninth) delivery.
    _jms_attempt(
        land, minutes(1), JMS_CONSUMER, JMS_SERVER, "rolled_back", "java.net.ConnectException",
        message_id=JMS_FIRST_AT_10, delivery_count=10, **where,
    )  # fmt: skip
    _jms_attempt(
        land, minutes(2), JMS_CONSUMER, JMS_SERVER, "rolled_back",
        "java.net.SocketTimeoutException", message_id=JMS_FIRST_AT_9, delivery_count=9, **where,
    )  # fmt: skip
    for i in range(2):
        _jms_attempt(
            land, minutes(5 + i), RETRY_CONSUMER, JMS_SERVER, "rolled_back",
            "java.net.ConnectException", broker=JMS_BROKER, queue=RETRY_QUEUE,
            message_id=JMS_RETRYING, delivery_count=1 + i,
        )  # fmt: skip


def write_landing(folder: Path) -> dict[str, int]:
    """Every scenario's landing records under `folder`; the record count per dataset."""
    land = Landing()
    _seed_000(land)
    _seed_001(land)
    _rollback_reset(land)
    _retention(land)
    _fuse(land)
    _jms_messages(land)
    return land.write(folder)


# What of the project a build reads (build.PROJECT_DIRS / PROJECT_FILES) and the log config.
PROJECT_PARTS = ("models", "macros", "seeds", "tests", "analyses", "conf")
PROJECT_FILES = ("dbt_project.yml", "selectors.yml", "profiles.yml")


def write_policy_project(root: Path, out: Path) -> Path:
    """A copy of the project at `root` in `out`, with the rows a user adds for this workload's
    own queues and consumers appended to the policy seeds; the shipped rows are kept as they are."""
    for part in PROJECT_PARTS:
        if (root / part).is_dir():
            shutil.copytree(root / part, out / part)
    for name in PROJECT_FILES:
        shutil.copyfile(root / name, out / name)
    for seed, rows in (
        ("failure_policies.csv", EXTRA_FAILURE_POLICIES),
        ("consumer_policies.csv", EXTRA_CONSUMER_POLICIES),
    ):
        path = out / "seeds" / seed
        text = path.read_text(encoding="utf-8")
        path.write_text(text.rstrip("\n") + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return out
