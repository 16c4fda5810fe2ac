"""`poisonwatch resume`: turn a JMS queue that `apply` paused (pause_queue) back on.

The only way a pause ends: the operator says the consumer is fixed or may try again. On a live
Artemis broker the queue is resumed there first, then the request is recorded in
`resume_requests`; killed in between, a re-run finds the queue still paused in the ledger and
resuming it again is harmless. Without a connection the request is recorded for a resume by
hand: for a pause made from the commands file, or with `--by-hand` for one apply made live.
Each resume names the pauses it ends (their action ids). The next build plans a new pause only
when the consumer trips anew on the failures after the resume.
"""

from __future__ import annotations

import getpass
import uuid
from dataclasses import dataclass
from typing import Any

from rich.console import Console

from poisonwatch.config import PoisonwatchError
from poisonwatch.remediation.ledger import (
    ApplyLock,
    ensure_ops_tables,
    ops_database,
    sql_string,
    utcnow,
)
from poisonwatch.textsafe import terminal


@dataclass
class Resumed:
    broker_name: str
    queue_name: str
    on_broker: bool  # resumed on a live Artemis broker (else recorded for a resume by hand)
    was_paused: bool  # the broker had it paused (on_broker only)
    request_id: str  # one per resume; a row per pause it ends


@dataclass
class OpenPause:
    action_id: str
    paused_at: str
    on_broker: bool  # apply paused it on a live broker (outcome applied_on_broker)


def open_pauses(engine: Any, queue: str) -> dict[str, list[OpenPause]]:
    """Broker name → the committed pauses of `queue` there that no resume names yet."""
    ops = ops_database()
    _, rows = engine.query(
        f"select p.broker_name, p.action_id, cast(p.paused_at as string), l.outcome "
        f"from `{ops}`.`paused_queues` p join `{ops}`.`action_log` l "
        f"on l.action_id = p.action_id and l.run_id = p.run_id "
        f"where p.queue_name = {sql_string(queue)} and l.outcome <> 'failed' "
        f"and not exists (select 1 from `{ops}`.`resume_requests` r "
        f"where r.paused_action_id = p.action_id) "
        f"order by p.broker_name, p.paused_at, p.action_id"
    )
    out: dict[str, list[OpenPause]] = {}
    for broker, action_id, at, outcome in rows:
        out.setdefault(str(broker), []).append(
            OpenPause(str(action_id), str(at), outcome == "applied_on_broker")
        )
    return out


def resume_queue(
    queue: str,
    broker: str | None = None,
    note: str | None = None,
    target: str | None = None,
    console: Console | None = None,
    by_hand: bool = False,
) -> Resumed:
    """Resume `queue` (see the module). `broker`: a URL or brokers.yml name; needed when apply
    paused the queue on more than one broker. `by_hand`: the operator resumed it on the broker
    already; only recorded (required when apply paused it live and there is no connection)."""
    from poisonwatch.broker import live_brokers, resolve_broker
    from poisonwatch.broker import resume_queue as resume_on_broker
    from poisonwatch.warehouse.engine import connect

    console = console or Console()
    live = live_brokers([broker] if broker else None)
    wanted = resolve_broker(broker).name if broker else None
    lock = ApplyLock()
    lock.acquire_file()  # not while an apply may be pausing it
    try:
        with connect(target) as engine:
            ensure_ops_tables(engine)
            paused = open_pauses(engine, queue)
            if wanted is not None:
                paused = {k: v for k, v in paused.items() if k == wanted}
            if not paused:
                where = f" on broker {wanted}" if wanted else ""
                raise PoisonwatchError(
                    f"queue {queue!r} is not paused by poisonwatch apply{where}: no committed "
                    "pause_queue action that a resume has not ended yet (`poisonwatch sql "
                    '"select * from poisonwatch_staging.stg_ops__paused_queues"` lists them)'
                )
            if len(paused) > 1:
                raise PoisonwatchError(
                    f"queue {queue!r} is paused on {len(paused)} brokers "
                    f"({', '.join(sorted(paused))}): name one with --broker"
                )
            name, pauses = next(iter(paused.items()))
            connected = live.get(name)
            on_broker = connected is not None and connected.kind == "artemis" and not by_hand
            if not on_broker and not by_hand and any(p.on_broker for p in pauses):
                raise PoisonwatchError(
                    f"apply paused {queue!r} on the live broker {name!r}, which this command "
                    f"cannot reach: give --broker 'artemis://USER:PW@HOST:PORT?name={name}' "
                    "(or list it in brokers.yml) to resume it there, or --by-hand once you "
                    "resumed it yourself"
                )
            was_paused = False
            if on_broker:
                assert connected is not None
                was_paused = resume_on_broker(connected, queue)
            request_id = uuid.uuid4().hex
            at = sql_string(utcnow())
            values = ", ".join(
                "("
                + ", ".join(
                    [
                        sql_string(request_id),
                        sql_string(p.action_id),
                        sql_string(name),
                        sql_string(queue),
                        sql_string(getpass.getuser()),
                        at,
                        sql_string(on_broker),
                        sql_string(note),
                    ]
                )
                + ")"
                for p in pauses
            )
            engine.execute(f"insert into `{ops_database()}`.`resume_requests` values {values}")
    finally:
        lock.release()
    shown, on = terminal(queue), terminal(name)
    if on_broker:
        state = "resumed" if was_paused else "was not paused on the broker any more; recorded"
        console.print(f"{shown} on {on}: {state}.")
    else:
        console.print(
            f"{shown} on {on}: recorded as resumed by hand (`resume()` on its queue MBean, "
            "or the broker's console)."
        )
    console.print(
        "The next build pauses it again only if its consumer trips anew on later failures."
    )
    return Resumed(name, queue, on_broker, was_paused, request_id)
