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
    "pause_queue",
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
    # Script-only actions apply wrote to a script whose effect no snapshot shows yet (each with
    # `script_written_at`, the first time its script was written).
    awaiting: list[dict[str, Any]] = field(default_factory=list)

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


def awaiting_query(filters: Filters) -> str:
    """The script-only actions awaiting confirmation: the mart says so, or (a mart built
    before the apply) it says pending while the ledger has their script written."""
    ops = ops_database()
    where = [
        "(a.status = 'awaiting_confirmation' "
        "or (a.status = 'pending' and l.outcome = 'script_written'))"
    ]
    if filters.queue is not None:
        where.append(f"a.queue_name = {sql_string(filters.queue)}")
    if filters.action_type is not None:
        where.append(f"a.action_type = {sql_string(filters.action_type)}")
    cols = ", ".join(f"a.`{c}`" for c in COLUMNS)
    return (
        f"select {cols}, l.applied_at as script_written_at "
        f"from `{MART_DATABASE}`.`remediation_actions` a inner join ("
        f"select action_id, min(applied_at) as applied_at, min_by(outcome, applied_at) as outcome "
        f"from `{ops}`.`action_log` group by action_id) l on a.action_id = l.action_id "
        f"where {' and '.join(where)} order by a.sequence_in_script"
    )


def load_pending(engine: Any, filters: Filters, with_awaiting: bool = False) -> Plan:
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
    awaiting: list[dict[str, Any]] = []
    if with_awaiting:
        columns, rows = engine.query(awaiting_query(filters))
        awaiting = [dict(zip(columns, r, strict=True)) for r in rows]
    return Plan(actions, counts, awaiting)


def runs_where(action: dict[str, Any], live_brokers: dict[str, Any]) -> str:
    """`live`: executed on a connected ActiveMQ broker by `apply --yes`; `script`: written for
    someone else to run (T-SQL for a DBA, Artemis/agent commands); `review`: never applied.
    `live_brokers`: name → BrokerTarget."""
    from poisonwatch.broker import is_live_action

    if action.get("requires_review") or not action.get("statement"):
        return "review"
    if is_live_action(action, live_brokers):
        return "live"
    return "script"


def _target(a: dict[str, Any]) -> str:
    return " / ".join(
        str(v)
        for v in (
            a["queue_name"],
            a["conversation_handle"] or a["message_id"],
            a["consumer_id"] if a["action_type"] in ("disable_consumer", "pause_queue") else None,
        )
        if v
    ) or str(a["consumer_id"] or "")


def print_plan(
    plan: Plan,
    console: Console | None = None,
    max_rows: int = 50,
    live_brokers: dict[str, Any] | None = None,
    wide: bool = False,
    fmt: str = "table",
) -> None:
    """The pending actions: a table that fits the terminal (one line per action, long targets
    and ids shortened with `…`), every value whole with `wide`, or every column of every
    action as `json` lines or `csv` on stdout. `run` says where each action runs (live on a
    connected broker, script-only, or review)."""
    console = console or Console()
    live_brokers = live_brokers or {}
    if fmt in ("json", "csv"):
        from poisonwatch.warehouse.sqlrun import print_rows

        print_rows(list(COLUMNS), [tuple(a[c] for c in COLUMNS) for a in plan.actions], fmt)
        return
    print_awaiting(plan.awaiting, console, wide=wide)
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


def _age(since: dt.datetime | None, now: dt.datetime) -> str:
    if since is None:
        return "?"
    if since.tzinfo is None:
        since = since.replace(tzinfo=dt.UTC)
    minutes = max(int((now - since).total_seconds() // 60), 0)
    days, rest = divmod(minutes, 24 * 60)
    hours, minutes = divmod(rest, 60)
    return (
        f"{days}d {hours:02d}h" if days else f"{hours}h {minutes:02d}m" if hours else f"{minutes}m"
    )


def print_awaiting(
    awaiting: list[dict[str, Any]],
    console: Console,
    wide: bool = False,
    now: dt.datetime | None = None,
) -> None:
    """The script-only actions whose script was written but whose effect no later snapshot
    shows yet, with their age (since the script was first written)."""
    if not awaiting:
        return
    now = now or dt.datetime.now(dt.UTC)
    table = Table(
        title=f"Awaiting confirmation ({len(awaiting)}): script written, not yet seen done"
    )
    overflow = "fold" if wide else "ellipsis"
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("type", overflow=overflow)
    table.add_column("server", overflow=overflow)
    table.add_column("target", overflow=overflow)
    table.add_column("written", no_wrap=True)
    table.add_column("age", justify="right", no_wrap=True)
    table.add_column("action_id", no_wrap=True)
    for a in awaiting:
        written = a.get("script_written_at")
        table.add_row(
            str(a["sequence_in_script"]),
            textsafe.terminal(a["action_type"]),
            textsafe.terminal(a["server_name"] or ""),
            textsafe.terminal(_target(a)),
            written.strftime("%Y-%m-%d %H:%M") if written else "?",
            _age(written, now),
            a["action_id"] if wide else a["action_id"][:8] + "…",
        )
    console.print(table)
    console.print(
        f"{len(awaiting)} action(s) awaiting confirmation: the next queue snapshot and `dbt "
        "build` mark them applied once it shows their effect; `plan --sql FILE --awaiting` "
        "writes their scripts again."
    )


# --- the T-SQL script -------------------------------------------------------------------------

# The command a DBA runs each script with (header and apply's message).
SQLCMD_COMMAND = "sqlcmd -S <server> -E -b -x -f 65001 -i"

# Characters a comment cannot show: controls, format (bidi, invisible), separators other than
# the space, private use and unassigned; replaced by `?`.
_HIDDEN_CATEGORIES = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")
# Characters a T-SQL literal carries as NCHAR(n): the C0 controls but tab, NEL, LS, PS (the
# macro tsql_string_literal takes out the same ones).
_INERT_CODES = frozenset([*range(0, 9), *range(10, 32), 0x85, 0x2028, 0x2029])


def _comment(text: str) -> str:
    """Text shown inert inside a `--` comment: one line, as written (apostrophes included),
    with hidden characters and `\\` as `?` and `$(` split (sqlcmd would read a variable)."""
    import unicodedata

    shown = "".join(
        "?"
        if c == "\\"
        or unicodedata.category(c) in _HIDDEN_CATEGORIES
        or (unicodedata.category(c) == "Zs" and c != " ")
        else c
        for c in text[:200]
    )
    return shown.replace("$(", "$ (")


def tsql_literal(value: str) -> str:
    """A T-SQL string expression for `value` that stays inert for sqlcmd, go-sqlcmd and SSMS,
    as the macro tsql_string_literal builds it: N'…' with quotes doubled, the characters of
    _INERT_CODES and a `\\` before a quote, another `\\` or the end as NCHAR(n) joined with
    `+`, and `$(` split; the value arrives exactly."""
    pieces, text = [], []
    for i, c in enumerate(value):
        after = value[i + 1 : i + 2]
        if ord(c) in _INERT_CODES or (c == "\\" and after in ("", "\\", "'")):
            pieces += ["N'" + "".join(text) + "'", f"NCHAR({ord(c)})"]
            text = []
        elif c == "\\" and ord(after) in _INERT_CODES:
            pieces += ["N'" + "".join(text) + "'", "NCHAR(92)"]
            text = []
        else:
            text.append("''" if c == "'" else c)
    pieces.append("N'" + "".join(text) + "'")
    kept = [p for p in pieces if p != "N''"] or ["N''"]
    return " + ".join(kept).replace("$(", "$' + N'(")


def _server_slug(server: str | None) -> str:
    """A file name part for a server, safe on any file system: ASCII letters, digits and `-`
    from its name, then 8 hex digits of its sha-256 (distinct servers stay distinct)."""
    import hashlib
    import unicodedata

    name = "" if server is None else server
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_name.lower()).strip("-")[:40].strip("-")
    digest = hashlib.sha256(("\0" if server is None else name).encode("utf-8")).hexdigest()
    return f"{slug or 'server'}-{digest[:8]}"


def script_path(base: Path, server: str | None) -> Path:
    """Where the script for `server` goes: `<stem>.<server slug>-<hash>.sql` beside `base`
    (`remediation.sql` → `remediation.sql1-3fa2b7c1.sql`)."""
    suffix = base.suffix or ".sql"
    return base.with_name(
        f"{base.stem if base.suffix else base.name}.{_server_slug(server)}{suffix}"
    )


def _tsql_actions(actions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sb = [a for a in actions if a["statement_language"] == "tsql" and a["statement"] is not None]
    return sorted(sb, key=lambda a: a["sequence_in_script"])


def render_scripts(
    actions: list[dict[str, Any]],
    title: str,
    generated_at: dt.datetime | None = None,
) -> dict[str | None, str]:
    """One T-SQL script per server (a script stops at its server guard on any other server,
    so one script for two servers would never run the second one's part): server → text."""
    by_server: dict[str | None, list[dict[str, Any]]] = {}
    for a in _tsql_actions(actions):
        by_server.setdefault(a["server_name"], []).append(a)
    return {
        server: render_script(group, title, generated_at) for server, group in by_server.items()
    }


def render_script(
    actions: list[dict[str, Any]],
    title: str,
    generated_at: dt.datetime | None = None,
) -> str:
    """The T-SQL script for one server's Service Broker actions, in `sequence_in_script`
    order, one `GO` batch each with a comment above saying why, after a guard that stops it
    on any other server. Every value is in an inert literal (tsql_literal) or an inert
    comment (_comment): sqlcmd reads only the template's own lines."""
    sb = _tsql_actions(actions)
    servers = {a["server_name"] for a in sb}
    if len(servers) > 1:
        raise ValueError("render_script: actions of several servers (use render_scripts)")
    server = next(iter(servers), None)
    when = (generated_at or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%d %H:%M:%SZ")
    out = [
        f"-- poisonwatch: {_comment(title)}",
        f"-- Generated {when}: {len(sb)} Service Broker statement(s) for one server, the one",
        "-- the guard below names. Run it on that server with:",
        f"--     {SQLCMD_COMMAND} <this file>",
        "-- -b stops at the first error, so the server guard below ends it on any other server.",
        "-- -x turns sqlcmd's variable substitution off, so no text in this script is read as a "
        "sqlcmd variable.",
        "-- -f 65001 reads the file as UTF-8 (it is written so, without a byte-order mark), so "
        "names reach SQL Server unchanged.",
        "-- Order: review scripts first (they roll back), then the removals, then queues are",
        "-- turned back on (a disabled queue is re-enabled only after its poison is gone).",
        "",
        "-- Server guard: the statements below are for this server only.",
    ]
    if server is None:
        out.append("THROW 50000, N'poisonwatch: the server of these actions is unknown.', 1;")
    else:
        out += [
            f"IF @@SERVERNAME <> {tsql_literal(str(server))}",
            "    THROW 50000, N'poisonwatch: this script is for another server.', 1;",
        ]
    out += ["GO", ""]
    for n, a in enumerate(sb, start=1):
        why = WHY.get(a["action_type"], a["action_type"])
        collateral = int(a["collateral_message_count"] or 0)
        out.append(
            f"-- {n}/{len(sb)} {_comment(str(a['action_type']))}: {_comment(why)}"
            + (f"; discards {collateral} message(s)" if collateral else "")
            + "."
        )
        if a.get("script_written_at") is not None:
            out.append(
                f"-- awaiting confirmation: first written {_comment(str(a['script_written_at']))}"
                "; run it again only if that run did not take effect."
            )
        out.append(
            f"-- reason {_comment(str(a['reason']))}, action {_comment(str(a['action_id']))}"
        )
        out.append(a["statement"])
        out.append("GO")
        out.append("")
    return "\n".join(out)


def write_script(path: Path, text: str) -> None:
    """Write atomically, as UTF-8 without a byte-order mark: a reader sees the whole script or
    none."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="\n")
    tmp.replace(path)


def write_scripts(base: Path, actions: list[dict[str, Any]], title: str) -> dict[Path, str | None]:
    """The scripts of render_scripts at script_path(base, server): path → server."""
    written: dict[Path, str | None] = {}
    for server, text in render_scripts(actions, title).items():
        path = script_path(base, server)
        write_script(path, text)
        written[path] = server
    return written


def run_plan(
    filters: Filters,
    sql_file: Path | None = None,
    target: str | None = None,
    brokers: list[str] | None = None,
    wide: bool = False,
    fmt: str = "table",
    awaiting: bool = False,
) -> Plan:
    """Print the plan; with `sql_file`, write one T-SQL script per server beside it
    (script_path), with the actions awaiting confirmation too when `awaiting`."""
    from poisonwatch.broker import live_brokers
    from poisonwatch.warehouse.engine import connect

    live = live_brokers(brokers)
    with connect(target) as engine:
        plan = load_pending(engine, filters, with_awaiting=True)
    print_plan(plan, live_brokers=live, wide=wide, fmt=fmt)
    if sql_file is not None:
        actions = plan.actions + (plan.awaiting if awaiting else [])
        written = write_scripts(sql_file, actions, "remediation actions")
        console = Console()
        if not written:
            console.print("No T-SQL statement to write.")
        for path, server in written.items():
            n = sum(1 for a in _tsql_actions(actions) if a["server_name"] == server)
            console.print(
                f"Wrote {n} T-SQL statement(s) for server {textsafe.terminal(str(server))} "
                f"to {textsafe.terminal(str(path))}"
            )
        if written:
            console.print(f"Run each on its server: `{SQLCMD_COMMAND} <file>`")
    return plan
