"""`poisonwatch apply`: apply pending remediation actions with Spark, exactly once.

A run (see ledger.py for the protocol):
1. take the apply lock (file lock + lease token of the store) — a second apply refuses;
2. recover: drop effect partitions of runs that never committed, move their scripts aside;
3. read the pending, non-review actions (mart `remediation_actions` minus `action_log`);
4. per batch, with a fresh run_id: append every effect table's rows for the batch (partition
   run_id), write the T-SQL script / command file of the run, then append the batch's
   `action_log` rows in one single-file insert — the commit point;
5. release the lock, print a summary.
Killed anywhere, the next apply finds either a committed run (effects + log + script) or an
uncommitted one (dropped at step 2, its actions still pending), never half of one.

Service Broker statements are not executed against SQL Server from here: they are written to
$POISONWATCH_HOME/scripts/apply-<run_id>.<server slug>-<hash>.sql, one script per server, for a
DBA (sqlcmd), and recorded `script_written`; the mart shows them awaiting_confirmation until a
later queue snapshot shows their effect.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from poisonwatch.config import PoisonwatchError, crash_point, project_var
from poisonwatch.remediation.ledger import (
    EFFECT_TABLES,
    MART_DATABASE,
    ApplyLock,
    crash_during,
    ensure_ops_tables,
    new_run_id,
    ops_database,
    recover,
    scripts_dir,
    sql_string,
    utcnow,
)
from poisonwatch.remediation.plan import (
    SQLCMD_COMMAND,
    Filters,
    load_pending,
    pending_query,
    print_plan,
    write_script,
    write_scripts,
)
from poisonwatch.textsafe import terminal
from poisonwatch.warehouse.schemas import RAW_DATABASE

# Which effect table each action type writes (re_enable_queue: the script and the log only).
EFFECTS: dict[str, tuple[str, ...]] = {
    "end_conversation": ("ended_conversations",),
    "dead_letter": ("dead_letter_queue",),
    "disable_consumer": ("disabled_consumers",),
    "pause_queue": ("paused_queues",),
    "park": ("parked_messages",),
    "discard": ("discarded_messages",),
    "retry_from_dlq": ("replayed_messages",),
    "purge_failure_log": ("purged_failure_logs",),
    "re_enable_queue": (),
}


@dataclass
class ApplyResult:
    dry_run: bool
    planned: int = 0
    applied: Counter[str] = field(default_factory=Counter)
    effect_rows: Counter[str] = field(default_factory=Counter)
    runs: list[str] = field(default_factory=list)
    scripts: list[Path] = field(default_factory=list)
    script_servers: dict[Path, str | None] = field(default_factory=dict)  # .sql → its server
    recovered: dict[str, list[str]] = field(default_factory=dict)
    broker: Counter[str] = field(default_factory=Counter)  # live outcomes by status
    failures: list[Any] = field(default_factory=list)
    released: list[str] = field(default_factory=list)  # queues parked messages went back to


def _actions_relation(ids: list[str]) -> str:
    id_list = ", ".join(sql_string(i) for i in ids)
    return (
        f"(select * from `{MART_DATABASE}`.`remediation_actions` where action_id in ({id_list})) a"
    )


# The message each dead_letter / park action moves: its last snapshot (body, properties, type)
# and its poison_messages row. Looked up once per apply into a cached temporary view, for the
# pending actions this apply runs: a lookup per run of 1,000 would aggregate the whole snapshot
# tables each time.
MESSAGE_CONTEXT_VIEW = "poisonwatch_apply_message_context"
MESSAGE_ACTION_TYPES = ("dead_letter", "park")


def message_context_select(filters: Filters) -> str:
    """One row per dead_letter / park action of the plan (`pending_query(filters)`, the
    actions load_pending reads; without --limit, so ties in its order cannot pick other rows):
    the message's last snapshot and its poison_messages columns. The snapshots are narrowed to
    those messages before aggregating.
    poison_messages is joined on the message's identity per broker kind (docs/rules.md): a
    JMS action names no server, while its poison_messages row names the failing consumer's."""
    raw, marts = RAW_DATABASE, MART_DATABASE
    types = ", ".join(sql_string(t) for t in MESSAGE_ACTION_TYPES)
    return f"""with
    a as (
        select action_id, broker_kind, server_name, database_name, broker_name, queue_name,
            conversation_handle, message_sequence_number, message_id
        from ({pending_query(replace(filters, limit=None))}) p
        where action_type in ({types})
    ),
    jms_snap as (
        select s.broker_name, s.queue_name, s.message_id,
            max_by(s.body, s.snapshot_at) as body,
            max_by(s.properties, s.snapshot_at) as properties,
            max_by(s.message_type, s.snapshot_at) as message_type
        from `{raw}`.`jms_queue_snapshots` s
        left semi join a
            on a.broker_kind = 'jms' and s.broker_name = a.broker_name
            and s.queue_name = a.queue_name and s.message_id = a.message_id
        group by s.broker_name, s.queue_name, s.message_id
    ),
    sb_snap as (
        select s.server_name, s.database_name, s.queue_name,
            upper(s.conversation_handle) as conversation_handle, s.message_sequence_number,
            max_by(s.message_body, s.snapshot_at) as body,
            max_by(s.validation, s.snapshot_at) as validation,
            max_by(s.message_type_name, s.snapshot_at) as message_type
        from `{raw}`.`ssb_queue_snapshots` s
        left semi join a
            on a.broker_kind = 'service_broker' and s.server_name = a.server_name
            and s.database_name = a.database_name and s.queue_name = a.queue_name
            and upper(s.conversation_handle) = a.conversation_handle
            and s.message_sequence_number = a.message_sequence_number
        group by s.server_name, s.database_name, s.queue_name, upper(s.conversation_handle),
            s.message_sequence_number
    ),
    pm as (
        select broker_kind, server_name, database_name, broker_name, queue_name,
            conversation_handle, message_sequence_number, message_id, address,
            message_type_name, delivery_count, failure_class
        from `{marts}`.`poison_messages`
    )
    select a.action_id,
        pj.address as pm_address,
        coalesce(pj.message_type_name, ps.message_type_name, js.message_type, ss.message_type)
            as message_type,
        coalesce(pj.delivery_count, ps.delivery_count) as delivery_count,
        coalesce(pj.failure_class, ps.failure_class) as failure_class,
        coalesce(js.body, ss.body) as body,
        coalesce(js.properties, case when ss.validation is not null
            then to_json(named_struct('validation', ss.validation)) end) as properties
    from a
    left join pm pj
        on a.broker_kind = 'jms' and pj.broker_kind = 'jms' and pj.broker_name = a.broker_name
        and pj.queue_name = a.queue_name and pj.message_id = a.message_id
    left join pm ps
        on a.broker_kind = 'service_broker' and ps.broker_kind = 'service_broker'
        and ps.server_name = a.server_name and ps.database_name = a.database_name
        and ps.queue_name = a.queue_name and ps.conversation_handle = a.conversation_handle
        and ps.message_sequence_number = a.message_sequence_number
    left join jms_snap js
        on a.broker_kind = 'jms' and js.broker_name = a.broker_name
        and js.queue_name = a.queue_name and js.message_id = a.message_id
    left join sb_snap ss
        on a.broker_kind = 'service_broker' and ss.server_name = a.server_name
        and ss.database_name = a.database_name and ss.queue_name = a.queue_name
        and ss.conversation_handle = a.conversation_handle
        and ss.message_sequence_number = a.message_sequence_number"""


def cache_message_context(engine: Any, filters: Filters) -> None:
    """Look the messages up once for this apply (session-scoped: gone when the session ends)."""
    engine.execute(f"cache table `{MESSAGE_CONTEXT_VIEW}` as {message_context_select(filters)}")


def drop_message_context(engine: Any) -> None:
    engine.execute(f"uncache table if exists `{MESSAGE_CONTEXT_VIEW}`")
    engine.execute(f"drop view if exists `{MESSAGE_CONTEXT_VIEW}`")


_MESSAGE_JOIN = f"left join `{MESSAGE_CONTEXT_VIEW}` m on m.action_id = a.action_id"


def effect_select(table: str, ids: list[str], at: dt.datetime) -> str:
    """The SELECT producing `table`'s rows (all columns but run_id) for these actions.
    dead_letter_queue and parked_messages read the view cache_message_context made."""
    a = _actions_relation(ids)
    ts = sql_string(at)
    if table == "ended_conversations":
        return (
            f"select a.action_id, a.server_name, a.database_name, a.queue_name, "
            f"a.conversation_handle, {ts}, cast(a.error_code as int), "
            f"substr(a.error_description, 1, 3000) from {a} "
            f"where a.action_type = 'end_conversation'"
        )
    if table == "dead_letter_queue":
        return f"""
            select a.action_id, a.broker_kind, a.broker_name, a.server_name, a.database_name,
                a.queue_name, a.conversation_handle, a.message_sequence_number, a.message_id,
                case when a.broker_kind = 'jms' then coalesce(a.orig_address, m.pm_address) end,
                case when a.broker_kind = 'jms' then coalesce(a.orig_queue, a.queue_name) end,
                m.message_type, m.delivery_count, m.failure_class, a.reason, m.body,
                m.properties, {ts}
            from {a} {_MESSAGE_JOIN}
            where a.action_type = 'dead_letter'"""
    if table == "disabled_consumers":
        return (
            f"select a.action_id, a.consumer_id, a.scheduled_group, {ts} from {a} "
            f"where a.action_type = 'disable_consumer'"
        )
    if table == "paused_queues":
        return (
            f"select a.action_id, a.broker_name, a.queue_name, a.consumer_id, "
            f"a.reason, {ts} from {a} where a.action_type = 'pause_queue'"
        )
    if table == "parked_messages":
        holding = (
            f"case when a.broker_kind = 'jms' then concat(a.queue_name, "
            f"{sql_string(str(project_var('jms_park_queue_suffix')))}) "
            f"else {sql_string(str(project_var('sb_holding_table')))} end"
        )
        return f"""
            select a.action_id, a.broker_kind, a.server_name, a.database_name, a.broker_name,
                a.queue_name, a.conversation_handle, a.message_sequence_number, a.message_id,
                {holding}, m.body, m.properties, {ts},
                {ts} + make_interval(0, 0, 0, 0, 0, coalesce(a.park_delay_minutes, 0), 0)
            from {a} {_MESSAGE_JOIN}
            where a.action_type = 'park'"""
    if table == "discarded_messages":
        return (
            f"select a.action_id, a.broker_kind, a.server_name, a.database_name, a.broker_name, "
            f"a.queue_name, a.conversation_handle, a.message_sequence_number, a.message_id, "
            f"a.reason, {ts} from {a} where a.action_type = 'discard'"
        )
    if table == "replayed_messages":
        return (
            f"select a.action_id, a.request_id, a.broker_name, a.queue_name, a.message_id, "
            f"a.orig_address, a.orig_queue, {ts} from {a} "
            f"where a.action_type = 'retry_from_dlq'"
        )
    if table == "purged_failure_logs":
        return (
            f"select a.action_id, a.consumer_id, a.server_name, a.activation_id, a.purge_scope, "
            f"a.purge_before, a.purge_record_count, {ts} from {a} "
            f"where a.action_type = 'purge_failure_log'"
        )
    raise ValueError(f"unknown effect table {table}")


def _insert_effects(
    engine: Any, table: str, ids: list[str], run_id: str, at: dt.datetime, partitioned: bool
) -> None:
    ops = ops_database()
    columns = [name for name, _ in EFFECT_TABLES[table] if name != "run_id"]
    cols = ", ".join(f"`{c}`" for c in columns)
    select = effect_select(table, ids, at)
    if partitioned:
        engine.execute(
            f"insert into `{ops}`.`{table}` partition (run_id = {sql_string(run_id)}) "
            f"({cols}) {select}"
        )
    else:
        engine.execute(
            f"insert into `{ops}`.`{table}` ({cols}, `run_id`) "
            f"select *, {sql_string(run_id)} from ({select}) e"
        )


def _id_set(ids: list[str]) -> str:
    return "(" + (", ".join(sql_string(i) for i in ids) or "null") + ")"


def _committed(engine: Any, ids: list[str]) -> set[str]:
    """Which of these action ids the ledger has (committed by some run)."""
    if not ids:
        return set()
    _, rows = engine.query(
        f"select distinct action_id from `{ops_database()}`.`action_log` "
        f"where action_id in {_id_set(ids)}"
    )
    return {str(r[0]) for r in rows}


def _parked_on_broker(engine: Any, broker_name: str) -> list[Any]:
    """The ledger's committed JMS park actions on this broker: the only source of where a
    parked message goes back to (its own properties could name any queue)."""
    from poisonwatch.broker import ParkRecord

    ops = ops_database()
    _, rows = engine.query(
        f"select p.action_id, p.queue_name, p.holding_queue, "
        f"date_format(p.due_at, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\"), p.message_id "
        f"from `{ops}`.`parked_messages` p join `{ops}`.`action_log` l "
        f"on l.action_id = p.action_id and l.run_id = p.run_id "
        f"where p.broker_kind = 'jms' and p.broker_name = {sql_string(broker_name)} "
        f"and l.outcome = 'applied_on_broker'"
    )
    return [ParkRecord(str(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4] or "")) for r in rows]


def _brokers_with_parks(engine: Any, names: set[str]) -> set[str]:
    """Which of these brokers the ledger has committed JMS park actions on."""
    if not names:
        return set()
    ops = ops_database()
    _, rows = engine.query(
        f"select distinct p.broker_name from `{ops}`.`parked_messages` p "
        f"join `{ops}`.`action_log` l on l.action_id = p.action_id and l.run_id = p.run_id "
        f"where p.broker_kind = 'jms' and l.outcome = 'applied_on_broker' "
        f"and p.broker_name in {_id_set(sorted(names))}"
    )
    return {str(r[0]) for r in rows}


def _commit(
    engine: Any,
    ids: list[str],
    run_id: str,
    at: dt.datetime,
    on_broker: list[str] | None = None,
    failed: list[str] | None = None,
) -> None:
    """The commit point: the batch's action_log rows in one insert that writes one file.
    Outcome: `failed` (a live broker could not run it), `applied_on_broker`, `script_written`
    (T-SQL for a DBA) or `applied` (recorded; commands file for the agent platform)."""
    a = _actions_relation(ids)
    engine.execute(
        f"insert into `{ops_database()}`.`action_log` (action_id, run_id, applied_at, outcome) "
        f"select /*+ COALESCE(1) */ a.action_id, {sql_string(run_id)}, {sql_string(at)}, "
        f"case when a.action_id in {_id_set(failed or [])} then 'failed' "
        f"when a.action_id in {_id_set(on_broker or [])} then 'applied_on_broker' "
        f"when a.statement_language = 'tsql' then 'script_written' else 'applied' end "
        f"from {a}"
    )


def _insert_failures(
    engine: Any, failures: list[Any], run_id: str, at: dt.datetime, partitioned: bool
) -> None:
    """`failed_broker_actions` rows: the broker's reason for each action it could not run."""
    rows = ", ".join(
        "("
        + ", ".join(
            sql_string(v)
            for v in (
                o.action.action_id,
                o.action.action_type,
                o.action.broker_name,
                o.action.queue_name,
                o.action.message_id,
                o.detail[:2000],
            )
        )
        + f", timestamp {sql_string(at)})"
        for o in failures
    )
    cols = "action_id, action_type, broker_name, queue_name, message_id, reason, failed_at"
    table = f"`{ops_database()}`.`failed_broker_actions`"
    if partitioned:
        engine.execute(
            f"insert into {table} partition (run_id = {sql_string(run_id)}) ({cols}) values {rows}"
        )
    else:
        engine.execute(
            f"insert into {table} ({cols}, run_id) select *, {sql_string(run_id)} "
            f"from (values {rows})"
        )


def _write_run_files(
    actions: list[dict[str, Any]], run_id: str, servers: dict[Path, str | None] | None = None
) -> list[Path]:
    """The run's files: one T-SQL script per server (apply-<run_id>.<server slug>-<hash>.sql,
    recorded in `servers`) and the commands file. Their names start with apply-<run_id>.,
    which recovery reads to set aside the files of a run that never committed."""
    folder = scripts_dir()
    written = []
    sql = [a for a in actions if a["statement_language"] == "tsql"]
    if sql:
        scripts = write_scripts(folder / f"apply-{run_id}.sql", sql, f"apply run {run_id}")
        written += list(scripts)
        if servers is not None:
            servers.update(scripts)
    other = [a for a in actions if a["statement_language"] != "tsql"]
    if other:
        path = folder / f"apply-{run_id}.commands.jsonl"
        lines = [
            json.dumps(
                {
                    "action_id": a["action_id"],
                    "action_type": a["action_type"],
                    "language": a["statement_language"],
                    "command": json.loads(a["statement"]),
                },
                ensure_ascii=False,
            )
            for a in other
        ]
        write_script(path, "\n".join(lines) + "\n")
        written.append(path)
    return written


def apply_actions(
    engine: Any,
    filters: Filters,
    yes: bool,
    lock: ApplyLock,
    batch_size: int = 1000,
    console: Console | None = None,
    on_step: Callable[[str], None] | None = None,
    brokers: dict[str, Any] | None = None,
) -> ApplyResult:
    """Apply pending actions (the caller holds lock's file lock). JMS dead_letter,
    retry_from_dlq, park and discard actions of a broker in `brokers` (name → BrokerTarget),
    and pause_queue on an Artemis one, run on that live broker first (poisonwatch.broker),
    then go to the ledger."""
    from poisonwatch.broker import BrokerError, LiveRunner

    console = console or Console()
    live = LiveRunner(brokers or {})
    cached = False
    ensure_ops_tables(engine)
    lock.acquire_lease(engine, getattr(engine, "target", ""))
    try:
        recovery = recover(engine)
        result = ApplyResult(dry_run=not yes, recovered=recovery.dropped)
        if recovery.anything:
            for table, runs in recovery.dropped.items():
                console.print(
                    f"[yellow]recovered:[/yellow] dropped {len(runs)} uncommitted run(s) from "
                    f"{ops_database()}.{table}"
                )
            for table, n in recovery.unpartitioned.items():
                console.print(
                    f"[yellow]warning:[/yellow] {ops_database()}.{table} is not partitioned by "
                    f"run_id and holds {n} row(s) of uncommitted runs: readers must join "
                    "action_log on (action_id, run_id)"
                )
            for path in recovery.aborted_scripts:
                console.print(f"[yellow]recovered:[/yellow] script of an uncommitted run → {path}")
        filters.include_review = False
        plan = load_pending(engine, filters)
        result.planned = len(plan.actions)
        if not yes:
            print_plan(plan, console, live_brokers=live.brokers)
            if plan.actions:
                console.print("[bold]Dry run:[/bold] nothing applied. Run again with --yes.")
            return result
        live_names = {a["broker_name"] for a in plan.actions if live.is_live(a)}

        def committed(ids: list[str]) -> set[str]:
            return _committed(engine, ids)

        def parked(name: str) -> list[Any]:
            return _parked_on_broker(engine, name)

        if live_names:
            live.prepare(live_names, committed, parked)
        # A parked message falls due whether or not the plan has other work on its broker: the
        # brokers with committed park actions are visited too, and one that cannot be reached
        # only for that is reported without stopping the run.
        for name in sorted(_brokers_with_parks(engine, set(live.brokers)) - live_names):
            try:
                live.prepare({name}, committed, parked)
            except BrokerError as exc:
                live.release_failures.append(f"{name}: {exc}")
        result.released = list(live.released)
        for failure in live.release_failures:
            console.print(f"[yellow]parked message not released:[/yellow] {terminal(failure)}")
        if result.released:
            sent = Counter(result.released)
            where = ", ".join(f"{n} to {terminal(q)}" for q, n in sorted(sent.items()))
            console.print(f"parked messages re-sent: {where}")
        if not plan.actions:
            console.print("[green]Nothing to apply.[/green]")
            return result
        partitioned = recovery.partitioned  # the lease keeps the ledgers as recovery saw them
        if any(a["action_type"] in MESSAGE_ACTION_TYPES for a in plan.actions):
            cache_message_context(engine, filters)
            cached = True
        batches = [
            plan.actions[i : i + batch_size] for i in range(0, len(plan.actions), batch_size)
        ]
        with Progress(
            TextColumn("[bold]apply[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,  # print_result (or the demo's line) says what was done
        ) as progress:
            task = progress.add_task("actions", total=len(plan.actions))
            stop: BrokerError | None = None
            for batch in batches:
                run_id = new_run_id()
                at = utcnow()
                # Live broker actions first: each is one broker transaction (with its journal
                # marker); a kill after it and before the ledger is settled by the next run.
                outcomes: dict[str, Any] = {}
                crash_point("before_broker")
                with crash_during("broker"):
                    for a in batch:
                        if stop is None and live.is_live(a):
                            progress.update(task, description=f"broker {a['broker_name']}")
                            try:
                                outcomes[a["action_id"]] = live.run(a)
                            except BrokerError as exc:
                                stop = exc
                crash_point("after_broker")
                # not yet run (broker lost) or busy (in delivery to a consumer): stay pending
                batch = [
                    a
                    for a in batch
                    if not live.is_live(a)
                    or (a["action_id"] in outcomes and outcomes[a["action_id"]].status != "busy")
                ]
                for o in outcomes.values():
                    result.broker[o.status] += 1
                    if o.status == "failed":
                        result.failures.append(o)
                if not batch:
                    if stop is not None:
                        break
                    continue
                failed = [i for i, o in outcomes.items() if o.status == "failed"]
                on_broker = [i for i, o in outcomes.items() if o.done]
                ids = [a["action_id"] for a in batch if a["action_id"] not in failed]
                types = {a["action_type"] for a in batch if a["action_id"] not in failed}
                tables = sorted({t for ty in types for t in EFFECTS.get(ty, ())})
                crash_point("before_effects")
                for table in tables:
                    progress.update(task, description=f"{table} ({run_id})")
                    with crash_during(table):
                        _insert_effects(engine, table, ids, run_id, at, partitioned[table])
                    crash_point(f"after:{table}")
                if failed:
                    _insert_failures(
                        engine,
                        [outcomes[i] for i in failed],
                        run_id,
                        at,
                        partitioned["failed_broker_actions"],
                    )
                result.scripts += _write_run_files(
                    [a for a in batch if a["action_id"] not in outcomes],
                    run_id,
                    result.script_servers,
                )
                # The fencing check: a lease taken over meanwhile stops this run uncommitted.
                lock.check_lease()
                crash_point("before_commit")
                with crash_during("action_log"):
                    _commit(engine, ids + failed, run_id, at, on_broker, failed)
                crash_point("after_commit")
                result.runs.append(run_id)
                for a in batch:
                    if a["action_id"] not in failed:
                        result.applied[a["action_type"]] += 1
                for name in {a["broker_name"] for a in batch if a["action_id"] in on_broker}:
                    with contextlib.suppress(BrokerError):
                        live.forget(
                            name,
                            {i for i in on_broker if outcomes[i].action.broker_name == name},
                        )
                progress.advance(task, len(batch))
                if stop is not None:
                    break
        for table in {t for ty in result.applied for t in EFFECTS.get(ty, ())}:
            run_list = ", ".join(sql_string(r) for r in result.runs)
            result.effect_rows[table] = int(
                engine.scalar(
                    f"select count(*) from `{ops_database()}`.`{table}` "
                    f"where run_id in ({run_list})"
                )
            )
        if stop is not None:
            raise PoisonwatchError(
                f"stopped: {stop}. Every action applied before is in the ledger; run apply "
                "again when the broker is back (actions it already ran are found in its "
                "journal, not run twice)."
            )
        return result
    finally:
        live.close()
        if cached:
            with contextlib.suppress(Exception):  # the session may be gone (a lost server)
                drop_message_context(engine)
        lock.release_lease()


def print_result(result: ApplyResult, console: Console | None = None) -> None:
    console = console or Console()
    if result.dry_run or not result.runs:
        return
    table = Table(title="Applied")
    table.add_column("action type")
    table.add_column("actions", justify="right")
    table.add_column("effect table")
    table.add_column("rows", justify="right")
    for action_type, n in sorted(result.applied.items()):
        effects = EFFECTS.get(action_type, ())
        table.add_row(
            action_type,
            str(n),
            ", ".join(effects) or "(script only)",
            ", ".join(str(result.effect_rows.get(t, 0)) for t in effects),
        )
    console.print(table)
    if result.broker:
        console.print(
            "on the live broker(s): "
            + ", ".join(f"{n} {status}" for status, n in sorted(result.broker.items()))
        )
    for o in result.failures[:20]:
        console.print(
            f"[yellow]failed[/yellow] {o.action.action_type} {terminal(o.action.message_id)}: "
            f"{terminal(o.detail)}"
        )
    console.print(f"run(s): {', '.join(result.runs)}")
    for path in result.scripts:
        if path in result.script_servers:
            server = terminal(str(result.script_servers[path]))
            console.print(f"wrote {terminal(str(path))} (server {server})")
        else:
            console.print(f"wrote {terminal(str(path))}")
    if result.script_servers:
        console.print(
            f"Give each .sql script to a DBA for its server: `{SQLCMD_COMMAND} <script>`. Its "
            "actions stay awaiting_confirmation until the next queue snapshot and `dbt build` "
            "show their effect (`poisonwatch plan` lists them)."
        )


def run_apply(
    filters: Filters,
    yes: bool,
    target: str | None = None,
    batch_size: int = 1000,
    brokers: list[str] | None = None,
) -> ApplyResult:
    """`brokers`: `--broker` values (stomp:// or artemis:// URLs, or names in brokers.yml),
    added to the brokers of $POISONWATCH_HOME/brokers.yml; their JMS actions run live."""
    from poisonwatch.broker import live_brokers
    from poisonwatch.warehouse.engine import connect

    live = live_brokers(brokers)
    lock = ApplyLock()
    lock.acquire_file()  # before Spark starts: a second apply refuses at once
    try:
        crash_point("locked")
        with connect(target) as engine:
            result = apply_actions(engine, filters, yes, lock, batch_size=batch_size, brokers=live)
        print_result(result)
        return result
    finally:
        lock.release()


def request_replay(
    message_ids: list[str],
    broker_name: str | None,
    queue: str | None,
    note: str | None,
    target: str | None = None,
) -> int:
    """`poisonwatch replay`: record requests to send dead-lettered JMS messages back to their
    original queue. The next `dbt build` turns the matching retry_from_dlq actions into
    applicable ones; `poisonwatch apply --type retry_from_dlq --yes` applies them."""
    import getpass
    import uuid

    from poisonwatch.warehouse.engine import connect

    if not message_ids:
        raise_error("give at least one --message-id")
    with connect(target) as engine:
        ensure_ops_tables(engine)
        dlq_filter = f" and queue_name = {sql_string(queue)}" if queue else ""
        broker_filter = f" and broker_name = {sql_string(broker_name)}" if broker_name else ""
        id_list = ", ".join(sql_string(m) for m in message_ids)
        _, rows = engine.query(
            f"select distinct broker_name, queue_name, message_id "
            f"from `{MART_DATABASE}`.`remediation_actions` "
            f"where action_type = 'retry_from_dlq' and message_id in ({id_list})"
            f"{dlq_filter}{broker_filter}"
        )
        found = {r[2] for r in rows}
        missing = [m for m in message_ids if m not in found]
        if missing:
            raise_error(
                "not in a dead-letter queue (per the last dbt build): " + ", ".join(missing)
            )
        now = utcnow()
        user = getpass.getuser()
        values = ", ".join(
            "("
            + ", ".join(
                sql_string(v) for v in (uuid.uuid4().hex, broker, dlq, message_id, user, now, note)
            )
            + ")"
            for broker, dlq, message_id in rows
        )
        engine.execute(f"insert into `{ops_database()}`.`replay_requests` values {values}")
    Console().print(
        f"Recorded {len(rows)} replay request(s). Next: `dbt build`, then "
        "`poisonwatch apply --type retry_from_dlq --yes`."
    )
    return len(rows)


def raise_error(message: str) -> None:
    from poisonwatch.config import PoisonwatchError

    raise PoisonwatchError(message)
