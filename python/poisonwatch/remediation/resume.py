"""`poisonwatch resume`: turn a JMS queue that `apply` paused (pause_queue) back on.

The only way a pause ends: the operator says the consumer is fixed or may try again. On a live
Artemis broker the queue is resumed there first, then the request is recorded in
`resume_requests`; killed in between, a re-run finds the queue still paused in the ledger and
resuming it again is harmless. Without a connection to the broker the request is recorded for a
resume by hand (the pause was a command in the commands file then). The next build plans a
new pause only when the consumer fails M times in a row after the resume.
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
    request_id: str


def paused_on(engine: Any, queue: str) -> dict[str, str]:
    """Broker name → when apply last paused `queue` there, for the brokers where no resume
    came after that pause (committed pause_queue actions only)."""
    ops = ops_database()
    _, rows = engine.query(
        f"select p.broker_name, cast(max(p.paused_at) as string) "
        f"from `{ops}`.`paused_queues` p join `{ops}`.`action_log` l "
        f"on l.action_id = p.action_id and l.run_id = p.run_id "
        f"where p.queue_name = {sql_string(queue)} and l.outcome <> 'failed' "
        f"and not exists (select 1 from `{ops}`.`resume_requests` r "
        f"where r.broker_name = p.broker_name and r.queue_name = p.queue_name "
        f"and r.resumed_at >= p.paused_at) "
        f"group by p.broker_name"
    )
    return {str(r[0]): str(r[1]) for r in rows}


def resume_queue(
    queue: str,
    broker: str | None = None,
    note: str | None = None,
    target: str | None = None,
    console: Console | None = None,
) -> Resumed:
    """Resume `queue` (see the module). `broker`: a URL or brokers.yml name; needed when apply
    paused the queue on more than one broker."""
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
            paused = paused_on(engine, queue)
            if wanted is not None:
                paused = {k: v for k, v in paused.items() if k == wanted}
            if not paused:
                where = f" on broker {wanted}" if wanted else ""
                raise PoisonwatchError(
                    f"queue {queue!r} is not paused by poisonwatch apply{where}: no committed "
                    'pause_queue action since its last resume (`poisonwatch sql "select * from '
                    'poisonwatch_staging.stg_ops__paused_queues"` lists the pauses)'
                )
            if len(paused) > 1:
                raise PoisonwatchError(
                    f"queue {queue!r} is paused on {len(paused)} brokers "
                    f"({', '.join(sorted(paused))}): name one with --broker"
                )
            name = next(iter(paused))
            connected = live.get(name)
            on_broker = connected is not None and connected.kind == "artemis"
            was_paused = False
            if on_broker:
                assert connected is not None
                was_paused = resume_on_broker(connected, queue)
            request_id = uuid.uuid4().hex
            values = ", ".join(
                [
                    sql_string(request_id),
                    sql_string(name),
                    sql_string(queue),
                    sql_string(getpass.getuser()),
                    sql_string(utcnow()),
                    sql_string(on_broker),
                    sql_string(note),
                ]
            )
            engine.execute(f"insert into `{ops_database()}`.`resume_requests` values ({values})")
    finally:
        lock.release()
    shown, on = terminal(queue), terminal(name)
    if on_broker:
        state = "resumed" if was_paused else "was not paused on the broker any more; recorded"
        console.print(f"{shown} on {on}: {state}.")
    else:
        console.print(
            f"{shown} on {on}: recorded. No Artemis connection to {on}: resume the queue "
            "there yourself (Jolokia `resume()` on its queue MBean)."
        )
    console.print(
        "The next build pauses it again only if its consumer fails M times in a row anew."
    )
    return Resumed(name, queue, on_broker, was_paused, request_id)
