"""The report's numbers: small aggregates computed by Spark SQL.

Every query groups in the warehouse and returns at most a few hundred rows (time series are cut
into at most `MAX_WINDOWS` windows), so the report costs one scan of each table it reads, on a
3,000-attempt store and on a 10-million-attempt one alike. Nothing here pulls rows per attempt or
per message into Python.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from poisonwatch.config import PoisonwatchError

if TYPE_CHECKING:
    from poisonwatch.warehouse.engine import Engine

MARTS = "poisonwatch"
INTERMEDIATE = "poisonwatch_intermediate"
MAX_WINDOWS = 120
# Sparse series (poison declared, dead-letter arrivals) read better in fewer, wider windows.
MAX_SPARSE_WINDOWS = 40
# Window lengths a person reads easily, in seconds.
NICE_WINDOWS = (
    60,
    300,
    900,
    1800,
    3600,
    3 * 3600,
    6 * 3600,
    12 * 3600,
    86400,
    7 * 86400,
    30 * 86400,
)
TOP_FAILURE_GROUPS = 10
TOP_QUEUES = 6
TOP_CONSUMERS = 12
TOP_SERVERS = 12
# Service Broker switches a queue off after this many whole-transaction rollbacks in a row.
ROLLBACK_LIMIT = 5
FAILURE_CLASSES = ("transient", "unknown", "permanent", "validation")
REQUIRED_MARTS = (
    "poison_messages",
    "dlq_messages",
    "queue_health",
    "consumer_circuit_breakers",
    "failure_groups",
    "remediation_actions",
)
KEY_COLUMNS = ("broker_kind", "server_name", "database_name", "broker_name", "queue_name")


@dataclass(frozen=True)
class Window:
    """The report's time range and the width of one bucket in its time series."""

    start: dt.datetime
    end: dt.datetime
    seconds: int

    def bucket(self, column: str) -> str:
        """Spark SQL for the start of the bucket holding `column` (a timestamp)."""
        return f"timestamp_seconds(floor(unix_seconds({column}) / {self.seconds}) * {self.seconds})"

    def where(self, column: str) -> str:
        """Spark SQL condition keeping `column` inside the range."""
        return (
            f"{column} >= timestamp'{self.start:%Y-%m-%d %H:%M:%S}' "
            f"and {column} <= timestamp'{self.end:%Y-%m-%d %H:%M:%S.%f}'"
        )

    @property
    def label(self) -> str:
        return duration_label(self.seconds)


def duration_label(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size} {unit}"
    return f"{seconds} s"


def choose_window(start: dt.datetime, end: dt.datetime, max_windows: int = MAX_WINDOWS) -> Window:
    """The smallest readable bucket width that cuts [start, end] into at most `max_windows`."""
    span = max((end - start).total_seconds(), 1.0)
    seconds = next((w for w in NICE_WINDOWS if span / w <= max_windows), NICE_WINDOWS[-1])
    return Window(start, end, seconds)


@dataclass
class ReportData:
    """Everything the page shows; each list holds aggregate rows as plain tuples."""

    window: Window | None
    counts: dict[str, int]
    sparse_window: Window | None = None
    failures_by_class: list[tuple[dt.datetime, str, int]] = field(default_factory=list)
    poison_declared: list[tuple[dt.datetime, str, str, int]] = field(default_factory=list)
    poison_by_reason: list[tuple[str, str, str, int, int]] = field(default_factory=list)
    dlq_arrivals: list[tuple[dt.datetime, int]] = field(default_factory=list)
    dlq_thresholds: list[tuple[dt.datetime, str, float | None, float | None, float | None]] = field(
        default_factory=list
    )
    failure_groups: list[tuple[Any, ...]] = field(default_factory=list)
    queue_latest: list[tuple[Any, ...]] = field(default_factory=list)
    queue_series: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    breaker_cells: list[tuple[str, str, int, int]] = field(default_factory=list)
    breakers: list[tuple[Any, ...]] = field(default_factory=list)
    actions: list[tuple[str, str, int, int]] = field(default_factory=list)
    alerts: list[tuple[Any, ...]] | None = None
    incidents: list[tuple[Any, ...]] | None = None
    policy_backtest: tuple[list[str], list[tuple[Any, ...]]] | None = None
    breaker_backtest: tuple[list[str], list[tuple[Any, ...]]] | None = None
    error_evidence: list[tuple[Any, ...]] | None = None


def _columns(engine: Engine, database: str, table: str) -> set[str]:
    columns, _ = engine.query(f"select * from `{database}`.`{table}` limit 0")
    return {c.lower() for c in columns}


def _time_range(engine: Engine, since_seconds: int | None) -> Window | None:
    """[first, last] attempt of the store, cut to the last `since_seconds` when given."""
    _, rows = engine.query(
        f"select min(first_attempted_at), max(last_attempted_at) from {MARTS}.poison_messages"
    )
    first, last = rows[0] if rows else (None, None)
    if first is None or last is None:
        return None
    if since_seconds is not None:
        first = max(first, last - dt.timedelta(seconds=since_seconds))
    return choose_window(first, last)


def _counts(engine: Engine) -> dict[str, int]:
    # One single-row aggregate per mart, cross-joined: each mart is read once.
    distinct_queues = ", ".join(f"coalesce({c}, '')" for c in KEY_COLUMNS)
    _, rows = engine.query(
        "select * from "
        "(select count(*), count_if(classification = 'poison'), count_if(is_live_poison) "
        f"from {MARTS}.poison_messages) "
        f"cross join (select count(*) from {MARTS}.dlq_messages) "
        # count(distinct a, b) skips rows with a null column: every key column is coalesced.
        f"cross join (select count(distinct {distinct_queues}), "
        "count_if(is_latest_snapshot and disable_risk <> 'ok') "
        f"from {MARTS}.queue_health) "
        f"cross join (select count_if(is_tripped) from {MARTS}.consumer_circuit_breakers) "
        "cross join (select count_if(status = 'pending'), count_if(status = 'applied'), "
        "count_if(status = 'awaiting_confirmation') "
        f"from {MARTS}.remediation_actions)"
    )
    names = (
        "messages that failed",
        "poison messages",
        "live poison",
        "dead-letter messages",
        "queues",
        "queues at risk or disabled",
        "tripped breakers",
        "pending actions",
        "applied actions",
        "actions awaiting confirmation",
    )
    return {n: int(v) for n, v in zip(names, rows[0], strict=True) if v is not None}


def _queue_label(row: tuple[Any, ...]) -> str:
    """broker_kind, server, database, broker, queue → one readable name."""
    kind, server, database, broker, queue = row
    where = f"{server}.{database}" if kind == "service_broker" else str(broker)
    return f"{where}/{queue}"


def collect(engine: Engine, since_seconds: int | None = None) -> ReportData:
    """Run the report's aggregate queries and return their (small) results."""
    missing = [t for t in REQUIRED_MARTS if not engine.table_exists(MARTS, t)]
    if missing:
        raise PoisonwatchError(
            f"the marts {', '.join(missing)} do not exist yet: run `dbt build` first"
        )
    window = _time_range(engine, since_seconds)
    data = ReportData(window=window, counts=_counts(engine))
    if window is None:
        return data
    in_range = window.where
    sparse = data.sparse_window = choose_window(window.start, window.end, MAX_SPARSE_WINDOWS)

    if engine.table_exists(INTERMEDIATE, "int_receive_attempts_sequenced"):
        # One scan of the attempts: failures per window and class, and all attempts in range.
        _, rows = engine.query(
            f"select {window.bucket('attempted_at')} as bucket, "
            "case when is_failure then coalesce(failure_class, 'unknown') end as failure_class, "
            f"count(*) from {INTERMEDIATE}.int_receive_attempts_sequenced "
            f"where {in_range('attempted_at')} group by 1, 2 order by 1, 2"
        )
        data.failures_by_class = [(b, c, int(n)) for b, c, n in rows if c is not None]
        data.counts = {"attempts": sum(int(n) for _, _, n in rows), **data.counts}

    _, rows = engine.query(
        f"select {sparse.bucket('last_failed_at')} as bucket, broker_kind, reason, count(*) "
        f"from {MARTS}.poison_messages "
        f"where classification = 'poison' and {in_range('last_failed_at')} "
        "group by 1, 2, 3 order by 1, 2, 3"
    )
    data.poison_declared = [(b, k, r, int(n)) for b, k, r, n in rows]
    _, rows = engine.query(
        "select broker_kind, classification, reason, count(*), count_if(is_live) "
        f"from {MARTS}.poison_messages group by 1, 2, 3 order by 4 desc"
    )
    data.poison_by_reason = [(k, c, r, int(n), int(live)) for k, c, r, n, live in rows]

    _, rows = engine.query(
        f"select {sparse.bucket('first_seen_at')} as bucket, count(*) from {MARTS}.dlq_messages "
        f"where {in_range('first_seen_at')} group by 1 order by 1"
    )
    data.dlq_arrivals = [(b, int(n)) for b, n in rows]

    _, data.failure_groups = engine.query(
        "select error_key, failure_class, normalized_message, failure_count, message_count, "
        f"queue_count, first_seen_at, last_seen_at from {MARTS}.failure_groups "
        f"order by failure_count desc, failure_group_id limit {TOP_FAILURE_GROUPS}"
    )

    _collect_queues(engine, data, window)
    _collect_breakers(engine, data)

    _, rows = engine.query(
        "select action_type, status, count(*), count_if(requires_review) "
        f"from {MARTS}.remediation_actions group by 1, 2 order by 1, 2"
    )
    data.actions = [(t, s, int(n), int(r)) for t, s, n, r in rows]

    _collect_optional(engine, data, sparse)
    return data


def _collect_queues(engine: Engine, data: ReportData, window: Window) -> None:
    # The latest snapshot of every queue, worst first: disabled, looping or at risk, deepest.
    _, data.queue_latest = engine.query(
        "select broker_kind, server_name, database_name, broker_name, queue_name, snapshot_at, "
        "message_count, oldest_message_age_seconds, poison_message_count, current_rollback_run, "
        f"longest_rollback_run, disable_risk, is_disabled from {MARTS}.queue_health "
        "where is_latest_snapshot order by case disable_risk when 'disabled' then 0 "
        "when 'loops_forever_risk' then 1 when 'at_risk' then 1 else 2 end, is_disabled desc, "
        "longest_rollback_run desc nulls last, "
        "message_count desc, queue_name"
    )
    # Series for the queues that matter most; bucketed so a long history stays small.
    chosen = data.queue_latest[:TOP_QUEUES]
    if not chosen:
        return
    keys = " or ".join(
        "("
        + " and ".join(_equals(col, val) for col, val in zip(KEY_COLUMNS, row[:5], strict=True))
        + ")"
        for row in chosen
    )
    _, rows = engine.query(
        "select broker_kind, server_name, database_name, broker_name, queue_name, "
        f"{window.bucket('snapshot_at')} as bucket, max(message_count), "
        "max(oldest_message_age_seconds), max(current_rollback_run), max(longest_rollback_run), "
        f"max(cast(is_disabled as int)) from {MARTS}.queue_health "
        f"where ({keys}) and {window.where('snapshot_at')} group by 1, 2, 3, 4, 5, 6 order by 6"
    )
    for row in chosen:
        data.queue_series[_queue_label(row[:5])] = []
    for row in rows:
        data.queue_series[_queue_label(row[:5])].append(row[5:])


def _literal(value: Any) -> str:
    """A Spark SQL string literal of `value` (backslashes and quotes escaped)."""
    text = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{text}'"


def _equals(column: str, value: Any) -> str:
    """`column = 'value'`, or `column is null`."""
    return f"{column} is null" if value is None else f"{column} = {_literal(value)}"


def _collect_breakers(engine: Engine, data: ReportData) -> None:
    _, data.breakers = engine.query(
        "select consumer_id, breaker_mode, max_consecutive_failures, same_type_threshold, "
        "longest_any_type_run, longest_same_type_run, same_type_exception_class, "
        "reporting_server_count, server_count, is_tripped, trip_reason, is_disabled_by_apply "
        f"from {MARTS}.consumer_circuit_breakers "
        "order by is_tripped desc, longest_any_type_run desc nulls last, consumer_id"
    )
    if not engine.table_exists(INTERMEDIATE, "int_jms__consumer_failure_runs"):
        return
    consumers = [row[0] for row in data.breakers[:TOP_CONSUMERS]]
    if not consumers:
        return
    listed = ", ".join(_literal(c) for c in consumers if c is not None)
    _, rows = engine.query(
        "select consumer_id, server_name, max(any_type_run), max(same_type_run) "
        f"from {INTERMEDIATE}.int_jms__consumer_failure_runs "
        f"where consumer_id in ({listed}) group by 1, 2 order by 1, 2"
    )
    data.breaker_cells = [(c, s, int(a or 0), int(t or 0)) for c, s, a, t in rows]


def _collect_optional(engine: Engine, data: ReportData, window: Window) -> None:
    """Sections of marts that other features add (alerts, backtests): shown when present."""
    if engine.table_exists(MARTS, "alerts"):
        cols = _columns(engine, MARTS, "alerts")
        wanted = [
            c
            for c in (
                "severity",
                "status",
                "alert_kind",
                "broker_kind",
                "queue_name",
                "consumer_id",
                "first_seen_at",
                "last_seen_at",
                "observed_value",
                "baseline_value",
                "threshold",
                "detail",
            )
            if c in cols
        ]
        order = "order by " + ", ".join(
            c for c in ("status desc", "severity", "last_seen_at desc") if c.split()[0] in cols
        )
        _, data.alerts = engine.query(
            f"select {', '.join(wanted)} from {MARTS}.alerts {order if len(order) > 9 else ''} "
            "limit 50"
        )
        data.alerts = [tuple(wanted), *data.alerts]
        needed = {"alert_kind", "first_seen_at", "observed_value", "baseline_value", "threshold"}
        if needed <= cols:
            _, rows = engine.query(
                f"select {window.bucket('first_seen_at')}, "
                f"{'queue_name' if 'queue_name' in cols else 'null'}, "
                "max(observed_value), max(baseline_value), max(threshold) "
                f"from {MARTS}.alerts where alert_kind = 'dlq_arrival_spike' "
                f"and {window.where('first_seen_at')} group by 1, 2 order by 1"
            )
            data.dlq_thresholds = [
                (b, q, _float(o), _float(base), _float(t)) for b, q, o, base, t in rows
            ]
    if engine.table_exists(MARTS, "alert_incidents"):
        # Open first, then quiet, then resolved; the worst and latest first within each.
        _, rows = engine.query(
            f"select {', '.join(INCIDENT_COLUMNS)} from {MARTS}.alert_incidents "
            "order by case status when 'open' then 0 when 'quiet' then 1 else 2 end, "
            "severity, last_seen_at desc, incident_id limit 50"
        )
        data.incidents = [INCIDENT_COLUMNS, *rows]
    data.policy_backtest = _backtest(engine, "policy_backtest")
    data.breaker_backtest = _backtest(engine, "breaker_backtest")
    if engine.table_exists(MARTS, "error_class_evidence"):
        # Recommendations first, then the signatures with the most failures.
        _, data.error_evidence = engine.query(
            f"select {', '.join(EVIDENCE_COLUMNS)} from {MARTS}.error_class_evidence "
            "order by is_reclassification_recommended desc, failure_count desc, "
            "failure_group_id limit 30"
        )


INCIDENT_COLUMNS = (
    "severity",
    "status",
    "alert_kind",
    "subject",
    "owner_team",
    "alert_count",
    "first_seen_at",
    "last_seen_at",
    "resolved_at",
)


EVIDENCE_COLUMNS = (
    "error_key",
    "normalized_message",
    "seed_failure_class",
    "failure_count",
    "message_count",
    "round(success_share, 2)",
    "evidence_class",
    "recommended_class",
    "case when attempts_saved > 0 then concat(attempts_saved, ' attempts') "
    "when false_poison_avoided > 0 then concat(false_poison_avoided, ' false poison') end",
)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _backtest(engine: Engine, table: str) -> tuple[list[str], list[tuple[Any, ...]]] | None:
    """Per candidate: every numeric column added up (means and p95s averaged) over its rows."""
    if not engine.table_exists(MARTS, table):
        return None
    _, schema = engine.query(f"describe {MARTS}.{table}")
    numeric = [
        name
        for name, kind, *_ in schema
        if name
        and not name.startswith("#")
        and kind.split("(")[0] in ("bigint", "int", "double", "decimal", "float", "long")
    ]
    if not numeric:
        return None
    parts = [
        f"round(avg({c}), 2)" if ("mean" in c or "p95" in c or "avg" in c) else f"sum({c})"
        for c in numeric
    ]
    _, rows = engine.query(
        f"select candidate_name, {', '.join(parts)} from {MARTS}.{table} "
        "group by candidate_name order by candidate_name = 'current' desc, candidate_name"
    )
    return ["candidate_name", *numeric], rows
