"""`poisonwatch plan`: the pending remediation actions, and the T-SQL script for a DBA.

Reads the mart `remediation_actions` (built by dbt) and leaves out what the ops ledger
`action_log` already records as applied, even when the mart is older than the last apply.
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from poisonwatch import textsafe
from poisonwatch.config import PoisonwatchError
from poisonwatch.remediation.ledger import MART_DATABASE, ops_database, sql_string

ACTION_TYPES = (
    "end_conversation",
    "re_enable_queue",
    "inspect_message",
    "discard",
    "park",
    "dead_letter",
    "retry_from_dlq",
    "disable_consumer",
    "purge_failure_log",
)

COLUMNS = (
    "action_id",
    "action_type",
    "broker_kind",
    "server_name",
    "database_name",
    "broker_name",
    "queue_name",
    "conversation_handle",
    "message_sequence_number",
    "message_id",
    "orig_address",
    "orig_queue",
    "consumer_id",
    "scheduled_group",
    "reason",
    "policy_name",
    "statement",
    "statement_language",
    "collateral_message_count",
    "requires_review",
    "review_reason",
    "due_at",
    "sequence_in_script",
    "park_delay_minutes",
)

WHY = {
    "inspect_message": "review only: shows the suspect message's body and rolls back, the "
    "message stays in the queue",
    "end_conversation": "ends the poison message's conversation with an error, then clears "
    "its tracking state",
    "discard": "receives and drops a disposable message (only if it is still the "
    "conversation's next one); the conversation goes on",
    "park": "moves the poison message to the holding table, due for re-send after the "
    "policy's delay",
    "dead_letter": "moves the poison message to the dead-letter table",
    "re_enable_queue": "turns the queue back on, after its poison messages are removed above",
}


@dataclass
class Filters:
    queue: str | None = None
    action_type: str | None = None
    include_review: bool = True
    limit: int | None = None

    def validate(self) -> None:
        if self.action_type is not None and self.action_type not in ACTION_TYPES:
            raise PoisonwatchError(
                f"unknown action type {self.action_type!r}; one of: {', '.join(ACTION_TYPES)}"
            )
        if self.limit is not None and self.limit < 1:
            raise PoisonwatchError("--limit must be a positive number")


@dataclass
class Plan:
    actions: list[dict[str, Any]]
    counts: Counter[tuple[str, str]] = field(default_factory=Counter)

    @property
    def collateral(self) -> int:
        return sum(int(a["collateral_message_count"] or 0) for a in self.actions)


def pending_query(filters: Filters) -> str:
    ops = ops_database()
    where = [
        "a.status = 'pending'",
        f"a.action_id not in (select action_id from `{ops}`.`action_log`)",
    ]
    if filters.queue is not None:
        where.append(f"a.queue_name = {sql_string(filters.queue)}")
    if filters.action_type is not None:
        where.append(f"a.action_type = {sql_string(filters.action_type)}")
    if not filters.include_review:
        where.append("not a.requires_review and a.statement is not null")
    limit = f" limit {int(filters.limit)}" if filters.limit else ""
    cols = ", ".join(f"a.`{c}`" for c in COLUMNS)
    return (
        f"select {cols} from `{MART_DATABASE}`.`remediation_actions` a "
        f"where {' and '.join(where)} order by a.sequence_in_script{limit}"
    )


def load_pending(engine: Any, filters: Filters) -> Plan:
    filters.validate()
    if not engine.table_exists(MART_DATABASE, "remediation_actions"):
        raise PoisonwatchError(
            "the mart poisonwatch.remediation_actions does not exist yet: run `dbt build` first"
        )
    if not engine.table_exists(ops_database(), "action_log"):
        raise PoisonwatchError(
            f"the ledger {ops_database()}.action_log does not exist yet: run `dbt build` first"
        )
    columns, rows = engine.query(pending_query(filters))
    actions = [dict(zip(columns, r, strict=True)) for r in rows]
    counts: Counter[tuple[str, str]] = Counter(
        (a["action_type"], a["queue_name"] or a["consumer_id"] or "") for a in actions
    )
    return Plan(actions, counts)


def runs_where(action: dict[str, Any], live_brokers: set[str]) -> str:
    """`live`: executed on a connected ActiveMQ broker by `apply --yes`; `script`: written for
    someone else to run (T-SQL for a DBA, Artemis/agent commands); `review`: never applied."""
    from poisonwatch.broker import LIVE_ACTION_TYPES

    if action.get("requires_review") or not action.get("statement"):
        return "review"
    if (
        action.get("broker_kind") == "jms"
        and action.get("action_type") in LIVE_ACTION_TYPES
        and action.get("broker_name") in live_brokers
    ):
        return "live"
    return "script"


def _target(a: dict[str, Any]) -> str:
    return " / ".join(
        str(v)
        for v in (
            a["queue_name"],
            a["conversation_handle"] or a["message_id"],
            a["consumer_id"] if a["action_type"] in ("disable_consumer",) else None,
        )
        if v
    ) or str(a["consumer_id"] or "")


def print_plan(
    plan: Plan,
    console: Console | None = None,
    max_rows: int = 50,
    live_brokers: set[str] | None = None,
    wide: bool = False,
    fmt: str = "table",
) -> None:
    """The pending actions: a table that fits the terminal (one line per action, long targets
    and ids shortened with `…`), every value whole with `wide`, or every column of every
    action as `json` lines or `csv` on stdout. `run` says where each action runs (live on a
    connected broker, script-only, or review)."""
    console = console or Console()
    live_brokers = live_brokers or set()
    if fmt in ("json", "csv"):
        from poisonwatch.warehouse.sqlrun import print_rows

        print_rows(list(COLUMNS), [tuple(a[c] for c in COLUMNS) for a in plan.actions], fmt)
        return
    if not plan.actions:
        console.print("[green]Nothing to do:[/green] no pending remediation actions.")
        return
    table = Table(title=f"Pending remediation actions ({len(plan.actions)})")
    if wide:
        for col in ("#", "type", "target", "reason", "review", "lost", "run", "action_id"):
            table.add_column(
                col, overflow="fold", justify="right" if col in ("#", "lost") else "left"
            )
    else:
        # One line per action: the columns get explicit widths from the terminal's (rich does
        # not shrink unbreakable values), long values end in `…`.
        seq = max(len(str(a["sequence_in_script"])) for a in plan.actions)
        flex = max(console.width - 25 - (seq + 6 + 4 + 6 + 9), 24)
        kind, why = min(16, flex * 3 // 10), min(19, flex // 4)
        cut = {"no_wrap": True, "overflow": "ellipsis"}
        table.add_column("#", justify="right", width=seq, **cut)
        table.add_column("type", width=kind, **cut)
        table.add_column("target", width=flex - kind - why, **cut)
        table.add_column("reason", width=why, **cut)
        table.add_column("review", width=6, **cut)
        table.add_column("lost", justify="right", width=4, **cut)
        table.add_column("run", width=6, **cut)
        table.add_column("action_id", width=9, **cut)
    rows = plan.actions if wide else plan.actions[:max_rows]
    for a in rows:
        review = a["review_reason"] or ("yes" if a["requires_review"] else "")
        if not wide:
            review = "yes" if a["requires_review"] else ""
        table.add_row(
            str(a["sequence_in_script"]),
            textsafe.terminal(a["action_type"]),
            textsafe.terminal(_target(a) if wide else _target(a).replace(" / ", "/")),
            textsafe.terminal(a["reason"] or ""),
            textsafe.terminal(review),
            str(a["collateral_message_count"] or 0),
            runs_where(a, live_brokers),
            a["action_id"] if wide else a["action_id"][:8] + "…",
        )
    console.print(table)
    if len(plan.actions) > len(rows):
        console.print(
            f"[dim]… and {len(plan.actions) - len(rows)} more (--wide shows all, "
            "--format json every column)[/dim]"
        )
    by = Table(title="By type and queue / consumer")
    by.add_column("type", overflow="fold" if wide else "ellipsis")
    by.add_column("queue / consumer", overflow="fold" if wide else "ellipsis")
    by.add_column("actions", justify="right", no_wrap=True)
    for (action_type, target), n in sorted(plan.counts.items()):
        by.add_row(textsafe.terminal(action_type), textsafe.terminal(target), str(n))
    console.print(by)
    where = Counter(runs_where(a, live_brokers) for a in plan.actions)
    console.print(
        f"run: {where['live']} live on broker(s) "
        f"{', '.join(sorted(live_brokers)) or '(none connected)'}, {where['script']} "
        f"script-only (T-SQL / commands files), {where['review']} review"
    )
    review = sum(1 for a in plan.actions if a["requires_review"])
    console.print(
        f"{len(plan.actions)} pending action(s), {review} for review only (never applied by "
        f"`apply`); ending conversations discards {plan.collateral} message(s) in the queues "
        "(column `lost`)."
    )


# --- the T-SQL script -------------------------------------------------------------------------

_UNSAFE_COMMENT = re.compile(r"[^\w .,:;()/=+#@-]", re.UNICODE)


def _comment(text: str) -> str:
    """Text safe inside a `--` comment: one line, no quotes or brackets, no comment markers."""
    return _UNSAFE_COMMENT.sub("?", text).replace("--", "??")[:200]


def tsql_literal(value: str) -> str:
    return "N'" + value.replace("'", "''") + "'"


def render_script(
    actions: list[dict[str, Any]],
    title: str,
    generated_at: dt.datetime | None = None,
) -> str:
    """One T-SQL script for the Service Broker actions, in `sequence_in_script` order, one
    `GO` batch each, a comment above each saying why, grouped by server (a guard stops the
    script on the wrong server)."""
    sb = [a for a in actions if a["statement_language"] == "tsql" and a["statement"] is not None]
    sb.sort(key=lambda a: a["sequence_in_script"])
    when = (generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%SZ")
    out = [
        f"-- poisonwatch: {_comment(title)}",
        f"-- Generated {when}: {len(sb)} Service Broker statement(s).",
        "-- Run each server's part on that server with sqlcmd, stopping at the first error:",
        "--     sqlcmd -S <server> -E -b -i <this file>",
        "-- Order: review scripts first (they roll back), then the removals, then queues are",
        "-- turned back on (a disabled queue is re-enabled only after its poison is gone).",
        "",
    ]
    server = None
    for n, a in enumerate(sb, start=1):
        if a["server_name"] != server:
            server = a["server_name"]
            out += [
                "-- Server guard: the statements below are for this server only.",
                f"IF @@SERVERNAME <> {tsql_literal(str(server))}",
                "    THROW 50000, N'poisonwatch: this part of the script is for another "
                "server.', 1;",
                "GO",
                "",
            ]
        why = WHY.get(a["action_type"], a["action_type"])
        collateral = int(a["collateral_message_count"] or 0)
        out.append(
            f"-- {n}/{len(sb)} {a['action_type']}: {_comment(why)}"
            + (f"; discards {collateral} message(s)" if collateral else "")
            + "."
        )
        # Only computed vocabulary and hex ids in comments: names stay in string literals.
        out.append(f"-- reason {_comment(str(a['reason']))}, action {a['action_id']}")
        out.append(a["statement"])
        out.append("GO")
        out.append("")
    return "\n".join(out)


def write_script(path: Path, text: str) -> None:
    """Write atomically: a reader sees the whole script or none."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def run_plan(
    filters: Filters,
    sql_file: Path | None = None,
    target: str | None = None,
    brokers: list[str] | None = None,
    wide: bool = False,
    fmt: str = "table",
) -> Plan:
    from poisonwatch.broker import live_brokers
    from poisonwatch.warehouse.engine import connect

    live = set(live_brokers(brokers))
    with connect(target) as engine:
        plan = load_pending(engine, filters)
    print_plan(plan, live_brokers=live, wide=wide, fmt=fmt)
    if sql_file is not None:
        write_script(sql_file, render_script(plan.actions, "pending remediation actions"))
        n = sum(1 for a in plan.actions if a["statement_language"] == "tsql" and a["statement"])
        Console().print(f"Wrote {n} T-SQL statement(s) to {sql_file}")
    return plan
