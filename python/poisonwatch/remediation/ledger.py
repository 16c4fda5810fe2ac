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
import re
import signal
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poisonwatch.config import (
    PoisonwatchError,
    home,
    release_file_lock,
    table_format,
    take_file_lock,
)
from poisonwatch.warehouse.partitions import drop_partitions, partition_values_by_table

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
    "paused_queues": [
        ("action_id", "string"),
        ("broker_name", "string"),
        ("queue_name", "string"),
        ("consumer_id", "string"),
        ("reason", "string"),
        ("paused_at", "timestamp"),
        ("run_id", "string"),
    ],
}

ACTION_LOG_COLUMNS = [
    ("action_id", "string"),
    ("run_id", "string"),
    ("applied_at", "timestamp"),
    ("outcome", "string"),
]
# The lease rows of earlier versions (by client time): still created, so stores and the dbt hook
# that creates it agree, but no longer read or written (see ApplyLock).
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
# `poisonwatch resume`: an operator turned a queue that apply paused back on.
RESUME_REQUEST_COLUMNS = [
    ("request_id", "string"),
    ("paused_action_id", "string"),
    ("broker_name", "string"),
    ("queue_name", "string"),
    ("resumed_by", "string"),
    ("resumed_at", "timestamp"),
    ("is_resumed_on_broker", "boolean"),
    ("note", "string"),
]
# The ledgers that are not effect tables: not partitioned by run_id (recovery drops nothing).
UNPARTITIONED_TABLES = {
    "action_log": ACTION_LOG_COLUMNS,
    "apply_leases": LEASE_COLUMNS,
    "replay_requests": REPLAY_REQUEST_COLUMNS,
    "resume_requests": RESUME_REQUEST_COLUMNS,
}
# How long a lease lives without renewal, by the store's clock; the holder renews it four times
# as often. POISONWATCH_APPLY_LEASE_SECONDS changes it (tests).
LEASE_TTL = dt.timedelta(minutes=10)
# One table per lease token: `create table` of a name that exists fails in the metastore, so the
# store hands out each token to one apply only.
TOKEN_TABLE_PREFIX = "apply_lease_"
TOKEN_COLUMNS = [
    ("event", "string"),
    ("lease_id", "string"),
    ("host", "string"),
    ("pid", "int"),
    ("process", "string"),
    ("target", "string"),
    ("at", "timestamp"),
]


class ApplyBusyError(PoisonwatchError):
    """Another `poisonwatch apply` holds the apply lock."""


class ApplyLeaseLostError(PoisonwatchError):
    """This apply's lease was taken over (it went unrenewed past its period): stop uncommitted."""


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
    """This client's time (naive UTC). Tests skew it with POISONWATCH_TEST_CLOCK_OFFSET_SECONDS,
    as a machine with a wrong clock would be: the apply lease must not depend on it."""
    now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
    offset = os.environ.get("POISONWATCH_TEST_CLOCK_OFFSET_SECONDS")
    return now + dt.timedelta(seconds=float(offset)) if offset else now


def new_run_id(now: dt.datetime | None = None) -> str:
    stamp = (now or utcnow()).strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{uuid.uuid4().hex[:12]}"


def _ddl(table: str, columns: list[tuple[str, str]], partitioned: bool) -> str:
    cols = ", ".join(f"`{name}` {type_}" for name, type_ in columns)
    fmt = table_format()
    part = " partitioned by (`run_id`)" if partitioned else ""
    return f"create table if not exists `{ops_database()}`.`{table}` ({cols}) using {fmt}{part}"


def ensure_ops_tables(engine: Any) -> None:
    """Create the ops database and every ledger apply writes, when missing."""
    ops = ops_database()
    _, rows = engine.query(f"show databases like {sql_string(ops)}")
    if not rows:
        engine.execute(f"create database if not exists `{ops}`")
    # One listing instead of a `create table if not exists` per ledger on every apply: on Delta
    # each of those reads the table's log even when it exists.
    _, listed = engine.query(f"show tables in `{ops}`")
    present = {str(r[1]).lower() for r in listed}
    for table, columns in UNPARTITIONED_TABLES.items():
        if table not in present:
            engine.execute(_ddl(table, columns, partitioned=False))
    for table, columns in EFFECT_TABLES.items():
        if table not in present:
            engine.execute(_ddl(table, columns, partitioned=True))


def committed_run_ids(engine: Any) -> set[str]:
    _, rows = engine.query(f"select distinct run_id from `{ops_database()}`.`action_log`")
    return {str(r[0]) for r in rows if r[0] is not None}


def _ops_table(table: str) -> str:
    return f"`{ops_database()}`.`{table}`"


def run_partitions(engine: Any) -> dict[str, list[str] | None]:
    """Per effect table, the run_id values of its partitions; None for a table that is not
    partitioned by run_id."""
    listed = partition_values_by_table(engine, [_ops_table(t) for t in EFFECT_TABLES], "run_id")
    return {table: listed[_ops_table(table)] for table in EFFECT_TABLES}


@dataclass
class Recovery:
    dropped: dict[str, list[str]]
    unpartitioned: dict[str, int]
    aborted_scripts: list[Path]
    # Per effect table, whether it is partitioned by run_id: apply then writes each run's rows
    # in a partition of its own, which the next recovery can drop.
    partitioned: dict[str, bool]

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
    listed = run_partitions(engine)
    for table, runs in listed.items():
        if runs is None:
            # Not partitioned (created elsewhere): cannot drop; count what readers must ignore.
            n = engine.scalar(
                f"select count(*) from `{ops}`.`{table}` t left anti join "
                f"`{ops}`.`action_log` l on t.action_id = l.action_id and t.run_id = l.run_id"
            )
            if n:
                unpartitioned[table] = int(n)
            continue
        orphans = sorted(set(runs) - committed)
        drop_partitions(engine, f"`{ops}`.`{table}`", "run_id", orphans)
        if orphans:
            dropped[table] = orphans
    aborted: list[Path] = []
    folder = scripts_dir()
    for path in sorted(folder.glob("apply-*")):
        run_id = path.name.removeprefix("apply-").split(".", 1)[0]
        if path.is_file() and run_id not in committed:
            target = folder / "aborted" / path.name
            target.parent.mkdir(exist_ok=True)
            path.replace(target)
            aborted.append(target)
    partitioned = {table: runs is not None for table, runs in listed.items()}
    return Recovery(dropped, unpartitioned, aborted, partitioned)


# --- crash injection (tests) -----------------------------------------------------------------


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


def lease_ttl() -> dt.timedelta:
    raw = os.environ.get("POISONWATCH_APPLY_LEASE_SECONDS")
    return dt.timedelta(seconds=float(raw)) if raw else LEASE_TTL


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def _start_ticks(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot), from /proc; None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces: count from its closing parenthesis.
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


def process_identity(pid: int | None = None) -> str:
    """`<boot id>:<pid>:<start ticks>`: one process of one boot of this machine (a pid alone is
    reused: pid_max is small and every JVM thread takes one). No clock is involved."""
    pid = os.getpid() if pid is None else pid
    return f"{_boot_id()}:{pid}:{_start_ticks(pid)}"


def _holder_alive(identity: str | None) -> bool:
    """Whether the process a lease row names (on this host) still runs; True when unknown."""
    try:
        boot, pid, ticks = str(identity).rsplit(":", 2)
        pid_number = int(pid)
    except ValueError:
        return True
    if boot != _boot_id():
        return boot == "unknown"  # another boot of this host: that process has ended
    return str(_start_ticks(pid_number)) == ticks


def _token_table(token: int) -> str:
    return f"{TOKEN_TABLE_PREFIX}{token:010d}"


_TOKEN_NAME = re.compile(rf"^{TOKEN_TABLE_PREFIX}(\d{{10}})$")


def lease_tokens(engine: Any) -> list[int]:
    """The lease tokens the store handed out (one table each), oldest first."""
    _, rows = engine.query(f"show tables in `{ops_database()}` like '{TOKEN_TABLE_PREFIX}*'")
    found = (_TOKEN_NAME.match(str(r[1])) for r in rows if len(r) > 1)
    return sorted(int(m.group(1)) for m in found if m)


def _already_exists(exc: Exception) -> bool:
    return "already exists" in str(exc).lower() or "ALREADY_EXISTS" in str(exc)


@dataclass
class LeaseHolder:
    """What the store says of one lease token: its holder and whether it still holds it."""

    token: int
    host: str | None
    pid: int | None
    process: str | None
    since: Any
    released: bool
    idle_seconds: float | None  # since its last acquire/renew row, by the store's clock
    observed_seconds: float | None  # since an empty token table was first seen, likewise


def read_lease(engine: Any, token: int) -> LeaseHolder | None:
    """Lease `token` as its table holds it; None when the table is gone (dropped meanwhile)."""
    table = f"`{ops_database()}`.`{_token_table(token)}`"
    now = "unix_micros(current_timestamp())"
    try:
        _, rows = engine.query(
            "select max(case when event = 'release' then 1 else 0 end), "
            f"({now} - unix_micros(max(case when event in ('acquire', 'renew') then at end)))"
            " / 1e6, "
            f"({now} - unix_micros(min(case when event = 'observed' then at end))) / 1e6, "
            "max(case when event = 'acquire' then host end), "
            "max(case when event = 'acquire' then pid end), "
            "max(case when event = 'acquire' then process end), "
            f"max(case when event = 'acquire' then at end) from {table}"
        )
    except Exception as exc:
        if token not in lease_tokens(engine):
            return None
        raise PoisonwatchError(f"could not read the apply lease {table}: {exc}") from exc
    released, idle, observed, host, pid, process, since = rows[0]
    return LeaseHolder(
        token=token,
        host=host,
        pid=None if pid is None else int(pid),
        process=process,
        since=since,
        released=bool(released),
        idle_seconds=None if idle is None else float(idle),
        observed_seconds=None if observed is None else float(observed),
    )


class ApplyLock:
    """Exclusive: a file lock under $POISONWATCH_HOME (same machine) plus a lease in the warehouse
    (any machine sharing it, e.g. the cluster target).

    The lease is ordered by the store, never by a client's clock: the store hands out each lease
    token once (the table `apply_lease_<token>`, whose `create table` fails for every apply but
    one), and the holder's rows carry the store's `current_timestamp()`. A token is taken only
    after the newest one was released, went unrenewed for the lease period by the store's clock
    (both times read in one query), or names a process of this host that has ended. The holder
    renews from a thread of its own; before each commit, apply checks that no newer token exists
    (a fencing token), so an apply whose lease was taken over stops before committing."""

    def __init__(self) -> None:
        self.path = home() / "apply.lock"
        self.handle: Any = None
        self.lease_id = uuid.uuid4().hex
        self.engine: Any = None
        self.target = ""
        self.token: int | None = None
        self.lost: str | None = None
        self._renewer: threading.Thread | None = None
        self._renew_engine: Any = None
        self._stop = threading.Event()
        self._renewed = 0.0  # time.monotonic() of the last renewal the store accepted

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

    # -- the lease ------------------------------------------------------------------------

    def _free(self, engine: Any, holder: LeaseHolder) -> bool:
        ttl = lease_ttl().total_seconds()
        if holder.released:
            return True
        if holder.idle_seconds is None:  # created, no acquire row yet (or its creator died)
            if holder.observed_seconds is None:
                self._insert(engine, holder.token, "observed")
                return False
            return holder.observed_seconds > ttl
        if holder.host == socket.gethostname() and not _holder_alive(holder.process):
            return True  # a local apply that died (kill -9): its lease is stale
        return holder.idle_seconds > ttl

    def _busy(self, holder: LeaseHolder | None) -> ApplyBusyError:
        who = (
            f"pid {holder.pid} on {holder.host}, since {holder.since}"
            if holder is not None and holder.host is not None
            else "an apply that is taking it now"
        )
        return ApplyBusyError(
            f"another `poisonwatch apply` holds the apply lease ({who}); two applies at once are "
            f"refused. Wait for it to finish and run this again (a lease that is not renewed "
            f"expires after {lease_ttl()})."
        )

    def _insert(self, engine: Any, token: int, event: str) -> None:
        engine.execute(
            f"insert into `{ops_database()}`.`{_token_table(token)}` select {sql_string(event)}, "
            f"{sql_string(self.lease_id)}, {sql_string(socket.gethostname())}, {os.getpid()}, "
            f"{sql_string(process_identity())}, {sql_string(self.target)}, current_timestamp()"
        )

    def acquire_lease(self, engine: Any, target: str) -> None:
        """Take the newest lease token or raise ApplyBusyError; then renew it until released."""
        ops = ops_database()
        self.engine = engine
        self.target = target
        columns = ", ".join(f"`{name}` {type_}" for name, type_ in TOKEN_COLUMNS)
        skip = 0
        for _ in range(5):
            tokens = lease_tokens(engine)
            newest = max(tokens, default=0)
            if newest:
                holder = read_lease(engine, newest)
                if holder is None:
                    continue  # dropped while we looked: look again
                if not self._free(engine, holder):
                    raise self._busy(holder)
            mine = max(newest + 1, skip)
            try:
                engine.execute(
                    f"create table `{ops}`.`{_token_table(mine)}` ({columns}) using parquet"
                )
            except Exception as exc:
                if not _already_exists(exc):
                    raise
                if mine in lease_tokens(engine):
                    continue  # another apply took this token first: see who holds it
                skip = mine + 1  # a folder left by a dropped table: the next token
                continue
            self.token = mine
            self._insert(engine, mine, "acquire")
            self._renewed = time.monotonic()
            for old in tokens:
                if old < mine - 1:  # keep the previous one to read; older ones go
                    with contextlib.suppress(Exception):
                        engine.execute(f"drop table if exists `{ops}`.`{_token_table(old)}`")
            self._start_renewer(engine)
            return
        raise self._busy(None)

    def _start_renewer(self, engine: Any) -> None:
        from poisonwatch.warehouse.engine import ThriftEngine

        if isinstance(engine, ThriftEngine):
            # A Thrift connection is not shared between threads: the renewer has its own, to
            # the same server (the cluster's, or the `serve` that owns the local store).
            self._renew_engine = engine.twin()
        else:
            self._renew_engine = engine
        self._stop.clear()
        self._renewer = threading.Thread(target=self._renew_loop, name="apply-lease", daemon=True)
        self._renewer.start()

    def _renew_loop(self) -> None:
        interval = lease_ttl().total_seconds() / 4
        while not self._stop.wait(interval):
            token = self.token
            if token is None:
                return
            try:
                # One insert only: check_lease, before each commit, looks for a newer token.
                self._insert(self._renew_engine, token, "renew")
                self._renewed = time.monotonic()
            except Exception as exc:
                if time.monotonic() - self._renewed > lease_ttl().total_seconds():
                    self.lost = f"could not renew the apply lease for {lease_ttl()}: {exc}"
                    return

    def check_lease(self) -> None:
        """Raise ApplyLeaseLostError unless this apply still holds the newest lease token (call
        right before a commit)."""
        if self.engine is None or self.token is None:
            return
        if self.lost is None:
            if max(lease_tokens(self.engine), default=0) != self.token:
                self.lost = f"lease token {self.token} was taken over by a newer apply"
            elif time.monotonic() - self._renewed > lease_ttl().total_seconds():
                # Nobody took it yet, but anyone may now: committing could overlap another apply.
                self.lost = f"the apply lease went unrenewed for more than {lease_ttl()}"
        if self.lost is not None:
            raise ApplyLeaseLostError(
                f"this apply lost its lease ({self.lost}); it stopped before committing the "
                "batch it was on. Everything committed before stays; run apply again."
            )

    def release_lease(self) -> None:
        if self.engine is None:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join(timeout=60)
            self._renewer = None
        if self._renew_engine is not None and self._renew_engine is not self.engine:
            with contextlib.suppress(Exception):
                self._renew_engine.close()
        self._renew_engine = None
        if self.token is not None:
            with contextlib.suppress(Exception):
                self._insert(self.engine, self.token, "release")
        self.token = None
        self.engine = None

    def release(self) -> None:
        self.release_lease()
        handle, self.handle = self.handle, None
        release_file_lock(handle)
