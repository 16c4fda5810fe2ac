"""The ops ledgers written by `poisonwatch apply`, the apply lock, and crash recovery.

Exactly-once with append-only Parquet:
- every effect row carries the `action_id` it belongs to and the `run_id` of the apply run that
  wrote it; the effect tables are partitioned by `run_id`;
- a run writes all its effects first and its `action_log` rows last, in one single-file insert:
  that insert is the commit point (one file appears by one rename, or not at all);
- at the start of every apply, partitions of runs with no `action_log` row are dropped (the run
  died before committing), and their scripts are moved aside. Readers that want to be exact even
  before the next apply join effects to `action_log` on (action_id, run_id).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poisonwatch.config import PoisonwatchError, home, release_file_lock, take_file_lock

OPS_DATABASE = "poisonwatch_ops"
MART_DATABASE = "poisonwatch"

# Effect tables: name -> columns (run_id last: it is the partition column).
# The first four are also created by the dbt on-run-start hook `create_ops_tables`; the column
# lists must stay the same there.
EFFECT_TABLES: dict[str, list[tuple[str, str]]] = {
    "ended_conversations": [
        ("action_id", "string"),
        ("server_name", "string"),
        ("database_name", "string"),
        ("queue_name", "string"),
        ("conversation_handle", "string"),
        ("ended_at", "timestamp"),
        ("error_code", "int"),
        ("error_description", "string"),
        ("run_id", "string"),
    ],
    "dead_letter_queue": [
        ("action_id", "string"),
        ("broker_kind", "string"),
        ("broker_name", "string"),
        ("server_name", "string"),
        ("database_name", "string"),
        ("queue_name", "string"),
        ("conversation_handle", "string"),
        ("message_sequence_number", "bigint"),
        ("message_id", "string"),
        ("orig_address", "string"),
        ("orig_queue", "string"),
        ("message_type_name", "string"),
        ("delivery_count", "int"),
        ("failure_class", "string"),
        ("reason", "string"),
        ("body", "string"),
        ("properties", "string"),
        ("dead_lettered_at", "timestamp"),
        ("run_id", "string"),
    ],
    "disabled_consumers": [
        ("action_id", "string"),
        ("consumer_id", "string"),
        ("scheduled_group", "string"),
        ("disabled_at", "timestamp"),
        ("run_id", "string"),
    ],
    "parked_messages": [
        ("action_id", "string"),
        ("broker_kind", "string"),
        ("server_name", "string"),
        ("database_name", "string"),
        ("broker_name", "string"),
        ("queue_name", "string"),
        ("conversation_handle", "string"),
        ("message_sequence_number", "bigint"),
        ("message_id", "string"),
        ("holding_queue", "string"),
        ("body", "string"),
        ("properties", "string"),
        ("parked_at", "timestamp"),
        ("due_at", "timestamp"),
        ("run_id", "string"),
    ],
    "discarded_messages": [
        ("action_id", "string"),
        ("broker_kind", "string"),
        ("server_name", "string"),
        ("database_name", "string"),
        ("broker_name", "string"),
        ("queue_name", "string"),
        ("conversation_handle", "string"),
        ("message_sequence_number", "bigint"),
        ("message_id", "string"),
        ("reason", "string"),
        ("discarded_at", "timestamp"),
        ("run_id", "string"),
    ],
    "replayed_messages": [
        ("action_id", "string"),
        ("request_id", "string"),
        ("broker_name", "string"),
        ("queue_name", "string"),
        ("message_id", "string"),
        ("orig_address", "string"),
        ("orig_queue", "string"),
        ("replayed_at", "timestamp"),
        ("run_id", "string"),
    ],
    # JMS actions a live broker could not run (message gone, broker refused), with its reason;
    # their action_log outcome is `failed`, so they are not retried forever.
    "failed_broker_actions": [
        ("action_id", "string"),
        ("action_type", "string"),
        ("broker_name", "string"),
        ("queue_name", "string"),
        ("message_id", "string"),
        ("reason", "string"),
        ("failed_at", "timestamp"),
        ("run_id", "string"),
    ],
    "purged_failure_logs": [
        ("action_id", "string"),
        ("consumer_id", "string"),
        ("server_name", "string"),
        ("activation_id", "string"),
        ("purge_scope", "string"),
        ("purge_before", "timestamp"),
        ("purged_record_count", "bigint"),
        ("purged_at", "timestamp"),
        ("run_id", "string"),
    ],
}

ACTION_LOG_COLUMNS = [
    ("action_id", "string"),
    ("run_id", "string"),
    ("applied_at", "timestamp"),
    ("outcome", "string"),
]
LEASE_COLUMNS = [
    ("lease_id", "string"),
    ("event", "string"),
    ("host", "string"),
    ("pid", "int"),
    ("target", "string"),
    ("at", "timestamp"),
]
REPLAY_REQUEST_COLUMNS = [
    ("request_id", "string"),
    ("broker_name", "string"),
    ("queue_name", "string"),
    ("message_id", "string"),
    ("requested_by", "string"),
    ("requested_at", "timestamp"),
    ("note", "string"),
]
LEASE_TTL = dt.timedelta(hours=2)


class ApplyBusyError(PoisonwatchError):
    """Another `poisonwatch apply` holds the apply lock."""


def ops_database() -> str:
    return os.environ.get("POISONWATCH_OPS_DATABASE", OPS_DATABASE)


def sql_string(value: Any) -> str:
    """A Spark SQL literal (strings with backslash escapes); `null` for None."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, dt.datetime):
        return f"timestamp'{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"
    text = str(value).replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n")
    return f"'{text.replace(chr(13), chr(92) + 'r')}'"


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def new_run_id(now: dt.datetime | None = None) -> str:
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:12]}"


def _ddl(table: str, columns: list[tuple[str, str]], partitioned: bool) -> str:
    cols = ", ".join(f"`{name}` {type_}" for name, type_ in columns)
    fmt = os.environ.get("POISONWATCH_FILE_FORMAT", "parquet")
    part = " partitioned by (`run_id`)" if partitioned else ""
    return f"create table if not exists `{ops_database()}`.`{table}` ({cols}) using {fmt}{part}"


def ensure_ops_tables(engine: Any) -> None:
    """Create the ops database and every ledger apply writes, when missing."""
    ops = ops_database()
    _, rows = engine.query(f"show databases like {sql_string(ops)}")
    if not rows:
        engine.execute(f"create database if not exists `{ops}`")
    engine.execute(_ddl("action_log", ACTION_LOG_COLUMNS, partitioned=False))
    engine.execute(_ddl("apply_leases", LEASE_COLUMNS, partitioned=False))
    engine.execute(_ddl("replay_requests", REPLAY_REQUEST_COLUMNS, partitioned=False))
    for table, columns in EFFECT_TABLES.items():
        engine.execute(_ddl(table, columns, partitioned=True))


def committed_run_ids(engine: Any) -> set[str]:
    _, rows = engine.query(f"select distinct run_id from `{ops_database()}`.`action_log`")
    return {str(r[0]) for r in rows if r[0] is not None}


def run_partitions(engine: Any, table: str) -> list[str] | None:
    """run_id values of the table's partitions; None when it is not partitioned by run_id."""
    try:
        _, rows = engine.query(f"show partitions `{ops_database()}`.`{table}`")
    except Exception:
        return None
    out = []
    for spec, *_rest in rows:
        for part in str(spec).split("/"):
            key, _, value = part.partition("=")
            if key == "run_id":
                out.append(_unescape_partition(value))
    return out


def _unescape_partition(value: str) -> str:
    import urllib.parse

    return urllib.parse.unquote(value)


@dataclass
class Recovery:
    dropped: dict[str, list[str]]
    unpartitioned: dict[str, int]
    aborted_scripts: list[Path]

    @property
    def anything(self) -> bool:
        return bool(self.dropped or self.unpartitioned or self.aborted_scripts)


def scripts_dir() -> Path:
    path = home() / "scripts"
    path.mkdir(parents=True, exist_ok=True)
    return path


def recover(engine: Any) -> Recovery:
    """Undo what runs that never committed left behind (call with the apply lock held)."""
    ops = ops_database()
    committed = committed_run_ids(engine)
    dropped: dict[str, list[str]] = {}
    unpartitioned: dict[str, int] = {}
    for table in EFFECT_TABLES:
        runs = run_partitions(engine, table)
        if runs is None:
            # Not partitioned (created elsewhere): cannot drop; count what readers must ignore.
            n = engine.scalar(
                f"select count(*) from `{ops}`.`{table}` t left anti join "
                f"`{ops}`.`action_log` l on t.action_id = l.action_id and t.run_id = l.run_id"
            )
            if n:
                unpartitioned[table] = int(n)
            continue
        for run_id in sorted(set(runs) - committed):
            engine.execute(
                f"alter table `{ops}`.`{table}` drop if exists partition "
                f"(run_id = {sql_string(run_id)})"
            )
            dropped.setdefault(table, []).append(run_id)
    aborted: list[Path] = []
    folder = scripts_dir()
    for path in sorted(folder.glob("apply-*")):
        run_id = path.name.removeprefix("apply-").split(".", 1)[0]
        if path.is_file() and run_id not in committed:
            target = folder / "aborted" / path.name
            target.parent.mkdir(exist_ok=True)
            path.replace(target)
            aborted.append(target)
    return Recovery(dropped, unpartitioned, aborted)


# --- crash injection (tests) -----------------------------------------------------------------


def crash_point(name: str) -> None:
    """Tests: `POISONWATCH_CRASH_AT=<name>` kills this process with SIGKILL here;
    `POISONWATCH_PAUSE_AT=<name>` touches $POISONWATCH_PAUSE_FILE and sleeps (for lock tests)."""
    if os.environ.get("POISONWATCH_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("POISONWATCH_PAUSE_AT") == name:
        marker = os.environ.get("POISONWATCH_PAUSE_FILE")
        if marker:
            Path(marker).write_text(f"{os.getpid()}\n")
        time.sleep(float(os.environ.get("POISONWATCH_PAUSE_SECONDS", "600")))


@contextlib.contextmanager
def crash_during(name: str) -> Iterator[None]:
    """Tests: `POISONWATCH_CRASH_AT=during:<name>` kills the process while the block runs
    (after `POISONWATCH_CRASH_DELAY` seconds, default 0.5), i.e. in the middle of a Spark write."""
    timer = None
    if os.environ.get("POISONWATCH_CRASH_AT") == f"during:{name}":
        delay = float(os.environ.get("POISONWATCH_CRASH_DELAY", "0.5"))
        timer = threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            time.sleep(float(os.environ.get("POISONWATCH_CRASH_DELAY", "0.5")) + 5)


# --- the apply lock ---------------------------------------------------------------------------


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _process_started_at(pid: int) -> dt.datetime | None:
    """When process `pid` started (naive UTC), from /proc on Linux; None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = next(
            int(line.split()[1])
            for line in Path("/proc/stat").read_text().splitlines()
            if line.startswith("btime ")
        )
        # Field 22 (starttime, clock ticks after boot); the command name (field 2) may hold
        # spaces, so count from its closing parenthesis.
        ticks = int(stat.rsplit(")", 1)[1].split()[19])
        seconds = boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    return dt.datetime.fromtimestamp(seconds, dt.UTC).replace(tzinfo=None)


def _lease_holder_alive(pid: int, leased_at: dt.datetime | str | None) -> bool:
    """Whether the local process that took a lease at `leased_at` still runs. A pid is reused
    (pid_max is small and every JVM thread takes one), so a live pid whose process started
    after the lease was taken is another process: the apply that took it has died."""
    if not _pid_alive(pid):
        return False
    started = _process_started_at(pid)
    if isinstance(leased_at, str):  # the Thrift server returns timestamps as text
        try:
            leased_at = dt.datetime.fromisoformat(leased_at)
        except ValueError:
            leased_at = None
    if started is None or not isinstance(leased_at, dt.datetime):
        return True
    return started <= leased_at.replace(tzinfo=None) + dt.timedelta(seconds=2)


class ApplyLock:
    """Exclusive: a file lock under $POISONWATCH_HOME (same machine) plus a lease row in
    `apply_leases` (any machine sharing the warehouse, e.g. the cluster target)."""

    def __init__(self) -> None:
        self.path = home() / "apply.lock"
        self.handle: Any = None
        self.lease_id = uuid.uuid4().hex
        self.engine: Any = None

    def acquire_file(self) -> None:
        started = utcnow().strftime("%Y-%m-%d %H:%M:%SZ")
        fh, holder = take_file_lock(
            self.path, f"pid {os.getpid()} on {socket.gethostname()}, started {started}"
        )
        if fh is None:
            raise ApplyBusyError(
                f"another `poisonwatch apply` is running ({holder}); two applies at once are "
                "refused. Wait for it to finish and run this again."
            )
        self.handle = fh

    def acquire_lease(self, engine: Any, target: str) -> None:
        ops = ops_database()
        self.engine = engine
        now = utcnow()
        host = socket.gethostname()
        engine.execute(
            f"insert into `{ops}`.`apply_leases` values ({sql_string(self.lease_id)}, 'acquire', "
            f"{sql_string(host)}, {os.getpid()}, {sql_string(target)}, {sql_string(now)})"
        )
        _, rows = engine.query(
            f"select a.lease_id, a.host, a.pid, a.at from `{ops}`.`apply_leases` a "
            f"left anti join (select lease_id from `{ops}`.`apply_leases` "
            f"where event = 'release') r "
            f"on a.lease_id = r.lease_id "
            f"where a.event = 'acquire' and a.at > {sql_string(now - LEASE_TTL)} "
            f"order by a.at, a.lease_id"
        )
        for lease_id, lease_host, pid, at in rows:
            if lease_id == self.lease_id:
                return
            if lease_host == host and pid is not None and not _lease_holder_alive(int(pid), at):
                continue  # a local apply that died (kill -9): its lease is stale
            self.release_lease()
            raise ApplyBusyError(
                f"another `poisonwatch apply` holds the apply lease (pid {pid} on {lease_host}, "
                f"since {at}); two applies at once are refused. Wait for it to finish and run "
                f"this again (a lease expires after {LEASE_TTL})."
            )

    def release_lease(self) -> None:
        if self.engine is None:
            return
        with contextlib.suppress(Exception):
            self.engine.execute(
                f"insert into `{ops_database()}`.`apply_leases` values "
                f"({sql_string(self.lease_id)}, 'release', {sql_string(socket.gethostname())}, "
                f"{os.getpid()}, null, {sql_string(utcnow())})"
            )
        self.engine = None

    def release(self) -> None:
        self.release_lease()
        handle, self.handle = self.handle, None
        release_file_lock(handle)
