"""Scenarios that raise each kind of the `alerts` mart on demand (`generate --alert-scenario`).

They run after the regular traffic has ended, in the next whole hour (windows of the alerts are
aligned to the clock), on queues and consumer settings of their own: the regular workload's
records are the same bytes with or without the flag, the scenarios' records come after them.
A follow-up (`generate --follow-up`) replays the same workload without writing it and writes
only what happens after a remediation: poison conversations ended, readers back (the stalled
queue commits what piled up), and a later snapshot of every queue, in a later window.

- `dlq_arrival_spike`: twelve messages on `alerts.spike` fail ten deliveries each (the agent
  reports TemporaryUnavailableException, so its breaker does not count them) and are
  dead-lettered within a few minutes.
- `queue_stalled`: `StalledQueue` commits one message, then messages keep arriving and nothing
  receives them: depth and the oldest message's age rise across snapshots.
- `queue_disable_imminent`: on `FragileQueue` (whole-transaction rollbacks) one message rolls back
  four times in a row and then waits: one more rollback and Service Broker disables the queue.
- `queue_loops_forever`: `LoopingQueue` runs with POISON_MESSAGE_HANDLING (STATUS = OFF) (seed
  004): one message rolls back eight times in a row, the queue stays enabled, and the poison
  message waits for its next receive and rollback.
- `breaker_tripped_still_receiving`: `agent.unfused` trips (three NullPointerExceptions in a row)
  but keeps receiving: its fuse is not wired in.
- `new_failure_group`: an error never seen before (8645, a memory-grant timeout) late in the
  history, on `AuditQueue`, then the message commits.
`queue_disabled` needs no scenario: the seeds' own scenarios disable `InventoryQueue`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from poisonwatch.generate.catalog import EXPENSE_REPORT, TUE, jms_error
from poisonwatch.generate.model import Consumer, ErrorSpec, JMessage, JQueue, SBMessage, SBQueue, js
from poisonwatch.generate.scenarios import DATABASE, JMS_BROKER, SERVER, scenario_guid

if TYPE_CHECKING:
    from poisonwatch.generate.state import Engine

ALERT_SCENARIOS = (
    "dlq_arrival_spike",
    "queue_stalled",
    "queue_disable_imminent",
    "queue_loops_forever",
    "breaker_tripped_still_receiving",
    "new_failure_group",
)
MINUTE_US = 60_000_000
HOUR_US = 60 * MINUTE_US
STALLED_QUEUE = "StalledQueue"
FRAGILE_QUEUE = "FragileQueue"
LOOPING_QUEUE = "LoopingQueue"
LOOPING_ROLLBACKS = 8
AUDIT_QUEUE = "AuditQueue"
SPIKE_CONSUMER = "agent.spike"
UNFUSED_CONSUMER = "agent.unfused"
SPIKE_MESSAGES = 12
STALLED_MESSAGES = 9


def check_kinds(kinds: list[str]) -> list[str]:
    """The scenario names in a stable order; `all` means every one; unknown names are an error."""
    chosen = set()
    for kind in kinds:
        if kind == "all":
            chosen.update(ALERT_SCENARIOS)
        elif kind in ALERT_SCENARIOS:
            chosen.add(kind)
        else:
            raise ValueError(
                f"unknown alert scenario {kind!r}; choose from {', '.join(ALERT_SCENARIOS)}, all"
            )
    return [k for k in ALERT_SCENARIOS if k in chosen]


def _sb_queue(name: str, style: str, poison_message_handling: bool = True) -> SBQueue:
    return SBQueue(
        SERVER,
        DATABASE,
        name,
        style=style,
        service=f"//Adventure-Works.com/{name.removesuffix('Queue')}Service",
        contract=f"//Adventure-Works.com/{name.removesuffix('Queue')}Contract",
        activation_procedure=f"Process{name.removesuffix('Queue')}",
        message_types=[(EXPENSE_REPORT, "X")],
        fixed=True,
        poison_message_handling=poison_message_handling,
    )


def alert_world(eng: Engine, kinds: list[str]) -> None:
    """The scenarios' own queues and consumer settings (added before any traffic)."""
    if "queue_stalled" in kinds:
        eng.sb_queues.append(_sb_queue(STALLED_QUEUE, "savepoint"))
    if "queue_disable_imminent" in kinds:
        eng.sb_queues.append(_sb_queue(FRAGILE_QUEUE, "whole"))
    if "queue_loops_forever" in kinds:
        eng.sb_queues.append(_sb_queue(LOOPING_QUEUE, "whole", poison_message_handling=False))
    if "new_failure_group" in kinds:
        eng.sb_queues.append(_sb_queue(AUDIT_QUEUE, "savepoint"))
    for kind, cid, address, server in (
        ("dlq_arrival_spike", SPIKE_CONSUMER, "alerts", "SRVAPP07"),
        ("breaker_tripped_still_receiving", UNFUSED_CONSUMER, "alerts", "SRVAPP08"),
    ):
        if kind in kinds:
            c = Consumer(cid, [server], eng.policies.consumer(cid), fixed=True)
            eng.consumers[cid] = c
            queue = f"{address}.{cid.removeprefix('agent.')}"
            eng.jms_queues.append(
                JQueue(JMS_BROKER, address, queue, c, ["com.example.agents.Document"])
            )


def _memory_grant_timeout() -> ErrorSpec:
    text = "A time-out occurred while waiting for memory resources to execute the query."
    return ErrorSpec(
        key="8645", failure_class="unknown", message=text, message_json=js(text), number_json="8645"
    )


def _group(eng: Engine, queue: str, name: str, fates: list[list[tuple[str, Any]]], t: int) -> None:
    q = next(x for x in eng.sb_queues if x.name == queue)
    group_id = scenario_guid(f"{name}/group")
    conv = [
        SBMessage(
            q,
            group_id,
            scenario_guid(f"{name}/{i}"),
            0,
            EXPENSE_REPORT,
            "X",
            "<ExpenseReport/>",
            fate,
            name,
        )
        for i, fate in enumerate(fates)
    ]
    eng.start(eng.sb_group([conv], t, f"{q.activation_procedure}:spid61"))


def _jms(eng: Engine, cid: str, name: str, k: int, fate: list[Any], t: int) -> None:
    jq = next(x for x in eng.jms_queues if x.consumer.consumer_id == cid)
    m = JMessage(
        jq,
        f"ID:alerts-{cid.removeprefix('agent.')}:1:1:1:{k}",
        jq.types[0],
        None,
        None,
        '{"document": "alert scenario"}',
        fate,
        name,
    )
    eng.start(eng.jms_message(m, t))


def _rewire(c: Consumer, t: int) -> Iterator[tuple[Any, ...]]:
    """The fuse trips (the consumer is disabled) but nothing stops the agent: it receives on."""
    from poisonwatch.generate.state import TICK

    yield (t, TICK)
    c.disabled = False


def next_hour(clock_us: int, minutes: int) -> int:
    """`minutes` into the first whole hour after clock_us."""
    return (clock_us // HOUR_US + 1) * HOUR_US + minutes * MINUTE_US


def start_alert_scenarios(eng: Engine, kinds: list[str], start_us: int) -> int:
    """Schedule the chosen scenarios from start_us on; returns the attempts they plan."""
    p = eng.policies
    planned = 0
    at = start_us
    if "queue_stalled" in kinds:
        _group(eng, STALLED_QUEUE, "alerts-stalled-last-ok", [[("C", None)]], at - 4 * MINUTE_US)
        planned += 1
        for i in range(STALLED_MESSAGES):
            # fate []: enqueued, never received (the reader is gone)
            _group(eng, STALLED_QUEUE, f"alerts-stalled-{i}", [[]], at + i * 5 * MINUTE_US)
    if "queue_disable_imminent" in kinds:
        fail = ("F", _memory_grant_timeout())
        _group(eng, FRAGILE_QUEUE, "alerts-fragile-ok", [[("C", None)]], at)
        # four whole-transaction rollbacks in a row, then the reader waits (no fifth)
        _group(eng, FRAGILE_QUEUE, "alerts-fragile", [[fail] * 4], at + 20 * MINUTE_US)
        planned += 5
    if "queue_loops_forever" in kinds:
        fail = ("F", _memory_grant_timeout())
        _group(eng, LOOPING_QUEUE, "alerts-looping-ok", [[("C", None)]], at)
        # past five rollbacks in a row, and the queue is not disabled: it never will be
        _group(
            eng, LOOPING_QUEUE, "alerts-looping", [[fail] * LOOPING_ROLLBACKS], at + 15 * MINUTE_US
        )
        planned += 1 + LOOPING_ROLLBACKS
    if "new_failure_group" in kinds:
        _group(
            eng,
            AUDIT_QUEUE,
            "alerts-new-error",
            [[("F", _memory_grant_timeout()), ("C", None)]],
            at + 25 * MINUTE_US,
        )
        planned += 2
    if "dlq_arrival_spike" in kinds:
        for k in range(SPIKE_MESSAGES):
            fate = [("F", jms_error(p, TUE, n=k), "SRVAPP07")] * 10
            _jms(eng, SPIKE_CONSUMER, "alerts-dlq-spike", k, fate, at + k * 20_000_000)
            planned += 10
    if "breaker_tripped_still_receiving" in kinds:
        npe = jms_error(p, "java.lang.NullPointerException", n=7)
        c = eng.consumers[UNFUSED_CONSUMER]
        _jms(eng, UNFUSED_CONSUMER, "alerts-unfused-trips", 0, [("F", npe, "SRVAPP08")] * 3, at)
        eng.start(_rewire(c, at + 10 * MINUTE_US))
        for k in range(1, 4):
            t = at + (15 + 5 * k) * MINUTE_US
            _jms(eng, UNFUSED_CONSUMER, "alerts-unfused-receives", k, [("A", None, "SRVAPP08")], t)
        planned += 6
    # snapshots every ten minutes through the scenario hour
    eng.start(eng.snapshots([at + m * MINUTE_US for m in (10, 20, 30, 40, 50)]))
    return planned


def follow_up(eng: Engine, at_us: int) -> None:
    """After a remediation: the conversations with a failed message were ended (by `apply`, which
    records that in its own ledger) and the readers are back: every other Service Broker message
    still queued commits (the stalled queue's first); JMS queues were drained. Then a snapshot."""
    t = at_us
    for q in sorted(eng.sb_queues, key=lambda q: q.name != STALLED_QUEUE):
        for m in sorted(q.inqueue.values(), key=lambda m: m.queuing_order):
            if (m.handle, m.seq) not in q.inqueue:
                continue  # ended with an earlier message of its conversation
            if any(other.failures for other in m.conversation):
                for other in m.conversation:
                    q.inqueue.pop((other.handle, other.seq), None)
                continue
            eng.emit_sb(t, m, "C", None, f"{q.activation_procedure}:spid61")
            t += 1_000_000
    for jq in eng.jms_queues:
        jq.inqueue.clear()
    eng.snapshot(t + 5 * MINUTE_US)
