"""Compare the marts with a generator's ground truth (`labels.jsonl`), in Spark SQL.

The comparison runs on the engine (local session or cluster) so it scales with the workload:
labels are read by Spark as JSON and full-outer-joined to the marts; only counts and a few
example mismatches come back to Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poisonwatch.textsafe import terminal
from poisonwatch.warehouse.engine import Engine

MART_DB = "poisonwatch"

# kind -> (label key columns, mart, mart key columns, compared columns, mart filter)
_MESSAGE_SB_KEYS = [
    "server_name",
    "database_name",
    "queue_name",
    "conversation_handle",
    "message_sequence_number",
]
_MESSAGE_JMS_KEYS = ["broker_name", "queue_name", "message_id"]


@dataclass
class KindReport:
    kind: str
    labels: int = 0
    agree: int = 0
    mismatches: list[dict[str, Any]] = field(default_factory=list)
    mismatch_count: int = 0

    @property
    def agreement(self) -> float:
        total = self.labels + self.extra
        return 1.0 if total == 0 else self.agree / total

    extra: int = 0  # rows in the mart that no label expects


@dataclass
class LabelReport:
    kinds: list[KindReport]

    @property
    def ok(self) -> bool:
        """Every kind has labels, and every label and every mart row agree."""
        return all(k.labels > 0 and k.mismatch_count == 0 and k.extra == 0 for k in self.kinds)


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _compare(
    engine: Engine,
    kind: str,
    label_sql: str,
    mart_sql: str,
    keys: list[str],
    compared: list[str],
) -> KindReport:
    on = " and ".join(f"l.`{k}` <=> m.`{k}`" for k in keys)
    same = " and ".join(f"l.`{c}` <=> m.`{c}`" for c in compared)
    key_present_l = f"l.`{keys[0]}` is not null"
    key_present_m = f"m.`{keys[0]}` is not null"
    select_cols = ", ".join(
        [f"coalesce(l.`{k}`, m.`{k}`) as `{k}`" for k in keys]
        + [f"l.`{c}` as `expected_{c}`, m.`{c}` as `actual_{c}`" for c in compared]
    )
    joined = (
        f"with l as ({label_sql}), m as ({mart_sql}) "
        f"select {select_cols}, {key_present_l} as in_labels, {key_present_m} as in_mart, "
        f"coalesce({same}, false) as is_same from l full outer join m on {on}"
    )
    _, counts = engine.query(
        f"select count_if(in_labels), count_if(in_labels and in_mart and is_same), "
        f"count_if(not in_labels), count_if(in_labels and not (in_mart and is_same)) "
        f"from ({joined})"
    )
    labels, agree, extra, bad = (int(v or 0) for v in counts[0])
    cols, rows = engine.query(
        f"select * from ({joined}) where not (in_labels and in_mart and is_same) limit 20"
    )
    return KindReport(
        kind=kind,
        labels=labels,
        agree=agree,
        extra=extra,
        mismatch_count=bad,
        mismatches=[dict(zip(cols, r, strict=True)) for r in rows],
    )


def compare_labels(engine: Engine, labels_path: Path) -> LabelReport:
    """Compare poison_messages, queue_health and consumer_circuit_breakers with the labels."""
    path = _sql_string(str(labels_path.resolve()))
    engine.execute(
        f"create or replace temporary view pw_labels using json options (path {path}, "
        "primitivesAsString 'false')"
    )
    reports = [
        _compare(
            engine,
            "message (service_broker)",
            "select server_name, database_name, queue_name, upper(conversation_handle) "
            "as conversation_handle, cast(message_sequence_number as bigint) as "
            "message_sequence_number, classification, reason from pw_labels "
            "where kind = 'message' and broker_kind = 'service_broker'",
            "select server_name, database_name, queue_name, conversation_handle, "
            f"message_sequence_number, classification, reason from {MART_DB}.poison_messages "
            "where broker_kind = 'service_broker'",
            _MESSAGE_SB_KEYS,
            ["classification", "reason"],
        ),
        _compare(
            engine,
            "message (jms)",
            "select broker_name, queue_name, message_id, classification, reason from pw_labels "
            "where kind = 'message' and broker_kind = 'jms'",
            f"select broker_name, queue_name, message_id, classification, reason "
            f"from {MART_DB}.poison_messages where broker_kind = 'jms'",
            _MESSAGE_JMS_KEYS,
            ["classification", "reason"],
        ),
        _compare(
            engine,
            "queue",
            "select server_name, database_name, queue_name, cast(is_disabled as boolean) "
            "as is_disabled, cast(loops_forever_risk as boolean) as loops_forever_risk "
            "from pw_labels where kind = 'queue'",
            "select server_name, database_name, queue_name, is_disabled, "
            "disable_risk = 'loops_forever_risk' as loops_forever_risk "
            f"from {MART_DB}.queue_health "
            "where broker_kind = 'service_broker' and is_latest_snapshot",
            ["server_name", "database_name", "queue_name"],
            ["is_disabled", "loops_forever_risk"],
        ),
        _compare(
            engine,
            "consumer",
            "select consumer_id, cast(is_tripped as boolean) as is_tripped, trip_reason "
            "from pw_labels where kind = 'consumer'",
            f"select consumer_id, is_tripped, trip_reason from {MART_DB}.consumer_circuit_breakers",
            ["consumer_id"],
            ["is_tripped", "trip_reason"],
        ),
    ]
    return LabelReport(kinds=reports)


def print_report(report: LabelReport) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Marts vs generator labels")
    for col in ("kind", "labels", "agree", "mismatched", "unexpected rows", "agreement"):
        table.add_column(col, justify="right" if col != "kind" else "left")
    for k in report.kinds:
        table.add_row(
            k.kind,
            str(k.labels),
            str(k.agree),
            str(k.mismatch_count),
            str(k.extra),
            f"{100 * k.agreement:.2f} %",
        )
    console = Console()
    console.print(table)
    for k in report.kinds:
        for m in k.mismatches[:5]:
            console.print(f"[red]{k.kind} mismatch:[/red] {terminal(m, limit=500)}")
