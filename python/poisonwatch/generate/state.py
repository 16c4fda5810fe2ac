"""The generator's simulation state: the engine that pops attempts in time order and writes them.

`poisonwatch generate`: a deterministic, seeded workload of landing files plus ground truth.

A discrete-event simulation in global time order. Service Broker conversation groups (one reader
holds a group's lock, so its attempts are serialised) and JMS messages (Artemis redelivery with
geometric back-off, to any server running the consumer) are actors; their next attempt waits in a
heap bounded by the messages in flight. Each popped attempt is written at once, to chunked files,
and updates the state the rules of docs/rules.md read: per message (failures, classes, latest
outcome), per queue (run of whole-transaction rollbacks) and per consumer setting and server
(circuit-breaker runs). Labels (`labels.jsonl`) come from that state, never from intentions.

Every attempt gets its own microsecond, ≥ 2 µs after the previous one, so ordering by
`attempted_at` is never a tie, in any time format and precision.
"""

from __future__ import annotations

import heapq
import json
import random
from collections import Counter
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from poisonwatch.config import project_var
from poisonwatch.generate.catalog import (
    TUE,
    jms_error,
)
from poisonwatch.generate.io import (
    T0_US,
    ChunkedCsv,
    ChunkedLines,
    ChunkedParquet,
    dotnet_time,
    guid,
    java_instant,
)
from poisonwatch.generate.model import (
    Consumer,
    DeadLetter,
    ErrorSpec,
    JMessage,
    JQueue,
    SBMessage,
    SBQueue,
    ServerRun,
    js,
)
from poisonwatch.generate.policy import Policies, classify, worst_class

SB, JMS, TICK = 0, 1, 2
OK_SB: list[tuple[str, ErrorSpec | None]] = [("C", None)]
ACK: list[tuple[str, ErrorSpec | None, str | None]] = [("A", None, None)]


def rr(rng: random.Random, a: int, b: int | None = None) -> int:
    """A random int in [a, b) (or [0, a)): like randrange, a few times cheaper."""
    if b is None:
        return int(rng.random() * a)
    return a + int(rng.random() * (b - a))


FROZEN = -1  # sent to an actor whose queue or consumer was disabled: it stops
MS = 1000
HOUR_US = 3_600_000_000
ACTIVATION_WINDOW_US = HOUR_US


def time_based_activation_ids(consumer_id: str) -> bool:
    """Every other consumer setting (a stable choice by name) numbers its activations by time."""
    return sum(consumer_id.encode()) % 2 == 0


SNAPSHOTS_DURING = 5  # snapshots while traffic flows; one more after the last attempt
MAX_CHUNK = 1_000_000
SWEEP_AFTER_US = 45 * 60_000_000  # stuck background conversations end one to two of these later
DLQ_RETENTION_US = 12 * HOUR_US  # operators purge dead letters older than this
# The simulated brokers' redelivery (as seeds/failure_policies.csv's jms row says).
REDELIVERY_DELAY_MS = 1000
REDELIVERY_MULTIPLIER = 2.0
MAX_REDELIVERY_DELAY_MS = 60_000

DATASET_NAMES = (
    "ssb_queue_snapshots",
    "ssb_queue_states",
    "ssb_receive_attempts",
    "ssb_broker_events",
    "jms_receive_attempts",
    "jms_queue_snapshots",
    "jms_address_settings",
    "jms_activations",
)


@dataclass
class GenerateSummary:
    out: Path
    seed: int
    attempts_requested: int
    files: list[tuple[str, Path, int, int]] = field(default_factory=list)  # dataset, path, n, bytes
    records: dict[str, int] = field(default_factory=dict)
    labels: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    seconds: float = 0.0

    @property
    def attempts_written(self) -> int:
        return self.records.get("ssb_receive_attempts", 0) + self.records.get(
            "jms_receive_attempts", 0
        )


class Writers:
    def __init__(self, out: Path, chunk: int):
        self.ssb_attempts = ChunkedLines(out / "ssb_receive_attempts", chunk, frozenset({1}))
        self.jms_attempts = ChunkedLines(out / "jms_receive_attempts", chunk, frozenset({1}))
        self.ssb_events = ChunkedLines(out / "ssb_broker_events", chunk)
        self.ssb_snapshots = ChunkedCsv(out / "ssb_queue_snapshots", "ssb_queue_snapshots", chunk)
        self.ssb_states = ChunkedCsv(out / "ssb_queue_states", "ssb_queue_states", chunk)
        self.jms_snapshots = ChunkedParquet(
            out / "jms_queue_snapshots", "jms_queue_snapshots", chunk
        )
        self.jms_activations = ChunkedParquet(out / "jms_activations", "jms_activations", chunk)
        self.jms_settings = ChunkedParquet(
            out / "jms_address_settings", "jms_address_settings", chunk
        )

    def close(self) -> dict[str, list[tuple[Path, int]]]:
        return {
            "ssb_queue_snapshots": self.ssb_snapshots.close(),
            "ssb_queue_states": self.ssb_states.close(),
            "ssb_receive_attempts": self.ssb_attempts.close(),
            "ssb_broker_events": self.ssb_events.close(),
            "jms_receive_attempts": self.jms_attempts.close(),
            "jms_queue_snapshots": self.jms_snapshots.close(),
            "jms_address_settings": self.jms_settings.close(),
            "jms_activations": self.jms_activations.close(),
        }


Actor = Generator[tuple[Any, ...], int, None]


class Engine:
    """The simulation: heap of pending attempts, world state, writers and labels."""

    def __init__(
        self,
        out: Path,
        seed: int,
        attempts: int,
        policies: Policies,
        chunk_records: int | None = None,
    ):
        self.rng = random.Random(seed)
        self.policies = policies
        self.target = attempts
        self.out = out
        chunk = chunk_records or max(50, min(MAX_CHUNK, attempts // 8))
        self.w = Writers(out, chunk)
        self.labels_fh = (out / "labels.jsonl").open("w", encoding="utf-8", newline="\n")
        self.label_counts: Counter[tuple[str, str, str]] = Counter()
        self.heap: list[tuple[int, int, Actor, tuple[Any, ...]]] = []
        self.seq = 0
        self.clock = T0_US
        self.emitted = 0
        self.attempt_no = 0
        self.sb_policy = policies.failure_policy("service_broker", "*")
        self.jms_mda = policies.failure_policy("jms", "*").max_delivery_attempts or int(
            project_var("default_max_delivery_attempts")
        )
        self.sb_queues: list[SBQueue] = []
        self.jms_queues: list[JQueue] = []
        self.consumers: dict[str, Consumer] = {}
        self.dlq: dict[str, dict[tuple[str, str], tuple[DeadLetter, int, int]]] = {}
        self.activation_ends: list[int] = []
        self.msg_counter = 0
        self.progress: Any = None
        self.traffic_end = 1 << 62  # when background arrivals stopped: no sweeps after it

    # ------------------------------------------------------------------ scheduling

    def start(self, actor: Actor) -> None:
        try:
            spec = next(actor)
        except StopIteration:
            return
        self.seq += 1
        heapq.heappush(self.heap, (spec[0], self.seq, actor, spec))

    def run(self) -> None:
        heap = self.heap
        pop, push = heapq.heappop, heapq.heappush
        next_progress = 20_000
        while heap:
            t, _, actor, spec = pop(heap)
            kind = spec[1]
            if kind == SB:
                if spec[2].queue.disabled or (spec[3] == "S" and t > self.traffic_end):
                    res = FROZEN
                else:
                    t = max(t, self.clock + 2)
                    self.clock = t
                    self.emit_sb(t, spec[2], spec[3], spec[4], spec[5])
                    res = t
            elif kind == JMS:
                if spec[2].queue.consumer.disabled:
                    res = FROZEN
                else:
                    t = max(t, self.clock + 2)
                    self.clock = t
                    self.emit_jms(t, spec[2], spec[3], spec[4], spec[5])
                    res = t
            else:
                t = max(t, self.clock + 2)
                self.clock = t
                res = t
            try:
                nxt = actor.send(res)
            except StopIteration:
                continue
            self.seq += 1
            push(heap, (nxt[0], self.seq, actor, nxt))
            if self.emitted >= next_progress and self.progress is not None:
                self.progress(self.emitted)
                next_progress = self.emitted + 20_000

    # ------------------------------------------------------------------ Service Broker

    def emit_sb(self, t: int, m: SBMessage, step: str, err: ErrorSpec | None, reader: str) -> None:
        q = m.queue
        if step == "F":
            assert err is not None
            outcome = "rolled_back" if q.style == "whole" else "rolled_back_to_savepoint"
            if outcome == "rolled_back" and q.guarded and q.run >= 4:
                # Background readers keep the run short (seed 000's savepoint pattern kicks in):
                # a background queue may look at risk (4) but never disables.
                outcome = "rolled_back_to_savepoint"
            m.failures += 1
            m.classes[err.failure_class] = m.classes.get(err.failure_class, 0) + 1
            m.last_success = False
            number, message = err.number_json, err.message_json
        elif step == "C":
            outcome = "committed"
            m.last_success = True
            q.inqueue.pop((m.handle, m.seq), None)
            number, message = "null", "null"
        else:  # "E" the application ended the conversation, "S" the sweeper did
            outcome = "ended_conversation"
            m.last_success = False
            for other in m.conversation:
                q.inqueue.pop((other.handle, other.seq), None)
            number, message = "null", "null"
        if outcome == "rolled_back":
            q.run += 1
            if q.run >= 5 and not q.disabled and q.poison_message_handling:
                q.disabled = True
                q.disabled_at = t
                ev = t + 3 * MS
                self.w.ssb_events.write(
                    f'{{"event_time":"{dotnet_time(ev, q.offset_style)}",{q.key_json},'
                    '"event_type":"BROKER_QUEUE_DISABLED"}\n'
                )
        else:
            q.run = 0
        self.attempt_no += 1
        self.emitted += 1
        self.w.ssb_attempts.write(
            f'{{"attempted_at":"{dotnet_time(t, q.offset_style)}",{m.prefix},'
            f'"outcome":"{outcome}","error_number":{number},"error_message":{message},'
            f'"reader":"{reader}","attempt_id":"SB{self.attempt_no:011d}"}}\n'
        )

    def finish_sb(self, m: SBMessage) -> None:
        if m.failures == 0:
            return
        q = m.queue
        classification, reason = classify(
            self.policies.failure_policy("service_broker", q.name),
            "service_broker",
            last_success=m.last_success,
            classes=m.classes,
            failures=m.failures,
            max_delivery_count=0,
            disposable=self.policies.is_disposable("service_broker", q.name, m.type_name),
        )
        self.write_label(
            {
                "kind": "message",
                "broker_kind": "service_broker",
                "server_name": q.server,
                "database_name": q.database,
                "queue_name": q.name,
                "conversation_handle": m.handle,
                "message_sequence_number": m.seq,
                "classification": classification,
                "reason": reason,
                "failure_class": worst_class(m.classes),
                "failure_count": m.failures,
                "scenario": m.scenario,
            }
        )

    def sb_group(
        self, convs: list[list[SBMessage]], t: int, reader: str
    ) -> Generator[tuple[Any, ...], int, None]:
        """One conversation group: its messages in order, one reader at a time."""
        rng = self.rng
        q = convs[0][0].queue
        for conv in convs:
            for m in conv:
                m.conversation = conv
                q.order += 1
                m.queuing_order = q.order
                m.enqueued_us = t
                q.inqueue[(m.handle, m.seq)] = m
        t += rr(rng, 2 * MS, 200 * MS)
        for conv in convs:
            for m in conv:
                last = "C"
                for step, err in m.fate:
                    res = yield (t, SB, m, step, err, reader)
                    if res == FROZEN:
                        self.finish_sb(m)
                        return
                    last = step
                    if step == "F":
                        base = 5 * MS if q.style == "savepoint" else 40 * MS
                        t = res + rr(rng, base, 10 * base)
                    else:
                        t = res + rr(rng, 1 * MS, 30 * MS)
                if last == "F" and not q.fixed:
                    # A sweeper job ends conversations stuck on a failed message after a while
                    # (seed 000's TrackMessage, seed 004's holding queue), so a busy queue does
                    # not grow without end; recent ones are still live and hold up their group.
                    res = yield (
                        t + SWEEP_AFTER_US + rr(rng, SWEEP_AFTER_US),
                        SB,
                        m,
                        "S",
                        None,
                        reader,
                    )
                    if res == FROZEN:
                        self.finish_sb(m)
                        return
                    last = "E"
                    t = res + rr(rng, 1 * MS, 30 * MS)
                self.finish_sb(m)
                if last == "F":
                    return  # poison or parked: the group stays locked behind it
                if last == "E":
                    break  # conversation ended; the group's next conversation goes on

    # ------------------------------------------------------------------ JMS

    def _safe(self, c: Consumer, run: ServerRun, cls: str) -> bool:
        n = c.policy.same_type_threshold
        same = run.same + 1 if cls == run.last_class else 1
        return same < n and run.any + 1 < c.policy.max_consecutive_failures

    def emit_jms(
        self, t: int, m: JMessage, step: str, err: ErrorSpec | None, server: str | None
    ) -> None:
        q = m.queue
        c = q.consumer
        if server is None:
            server = c.servers[rr(self.rng, len(c.servers))]
        m.deliveries += 1
        dc = m.deliveries
        run = c.runs[server]
        if step == "F":
            assert err is not None
            if not err.temporary and c.guarded and not self._safe(c, run, err.key):
                # Background settings must not trip by accident: another server takes the
                # delivery, or the agent reports it as temporarily unavailable.
                for other in c.servers:
                    if self._safe(c, c.runs[other], err.key):
                        server, run = other, c.runs[other]
                        break
                else:
                    err = jms_error(self.policies, TUE, n=len(m.message_id))
            outcome = "temporarily_unavailable" if err.temporary else "rolled_back"
            m.failures += 1
            if dc > m.max_failed_dc:
                m.max_failed_dc = dc
            m.classes[err.failure_class] = m.classes.get(err.failure_class, 0) + 1
            m.last_success = False
            exc = f'"exception_class":{js(err.key)},"exception_message":{err.message_json},'
            exc += f'"stack_trace":{err.stack_json}'
        else:
            outcome = "acknowledged"
            m.last_success = True
            q.inqueue.pop(m.message_id, None)
            exc = '"exception_class":null,"exception_message":null,"stack_trace":null'
        act = self.activation(c, server, run, t)
        if outcome == "rolled_back":
            if err is not None and err.key == run.last_class:
                run.same += 1
            else:
                run.same = 1
            run.last_class = err.key if err is not None else None
            run.any += 1
            run.longest_same = max(run.longest_same, run.same)
            run.longest_any = max(run.longest_any, run.any)
            run.act_failed = True
            self.check_breaker(c, run)
        elif outcome == "acknowledged":
            run.same = run.any = 0
            run.last_class = None
            run.act_failed = False
        self.emitted += 1
        self.w.jms_attempts.write(
            f'{{"attempted_at":"{java_instant(t)}",{m.prefix1},"delivery_count":{dc},'
            f'"redelivered":{"true" if dc > 1 else "false"},{m.prefix2},'
            f'"server_name":"{server}","activation_id":"{act}","outcome":"{outcome}",{exc}}}\n'
        )

    def check_breaker(self, c: Consumer, run: ServerRun) -> None:
        p = c.policy
        if run.reported or not (
            run.longest_same >= p.same_type_threshold
            or run.longest_any >= p.max_consecutive_failures
        ):
            return
        run.reported = True
        reporting = sum(1 for r in c.runs.values() if r.reported)
        if reporting >= (2 if p.breaker_mode == "MANY" else 1):
            c.tripped_itself = True
            c.disabled = True
            if p.scheduled_group:
                for other in self.consumers.values():
                    if other.policy.scheduled_group == p.scheduled_group:
                        other.disabled = True

    def activation(self, c: Consumer, server: str, run: ServerRun, t: int) -> str:
        window = (t - T0_US) // ACTIVATION_WINDOW_US
        if window != run.act_window:
            if run.act_window >= 0:
                self.close_activation(c, server, run, final=False)
            run.act_window = window
            run.act_id = guid(self.rng.getrandbits(128), upper=False)
            start = T0_US + window * ACTIVATION_WINDOW_US
            if time_based_activation_ids(c.consumer_id):
                # Seed 002: an activation id is a time or a UUID, plus the server name on
                # every message; a time-based id repeats on every server of the setting that
                # started in the same window (two activations, one id).
                run.act_id = "run-" + java_instant(start)
            run.act_start = start + min(t - start, rr(self.rng, 0, 30_000_000))
            run.act_failed = False
        run.act_last_us = t
        return run.act_id

    def close_activation(self, c: Consumer, server: str, run: ServerRun, final: bool) -> None:
        if final and not c.disabled and run.act_window == (self.clock - T0_US) // HOUR_US:
            status, finished = "running", None
        else:
            status = "failed" if run.act_failed or (final and c.disabled) else "succeeded"
            finished = run.act_last_us + 150 * MS
        self.w.jms_activations.write(
            (run.act_id, c.consumer_id, server, run.act_start, finished, status)
        )

    def finish_jms(self, m: JMessage) -> None:
        if m.failures == 0:
            return
        q = m.queue
        classification, reason = classify(
            self.policies.failure_policy("jms", q.name),
            "jms",
            last_success=m.last_success,
            classes=m.classes,
            failures=m.failures,
            max_delivery_count=m.max_failed_dc,
            disposable=self.policies.is_disposable("jms", q.name, m.type_name),
        )
        self.write_label(
            {
                "kind": "message",
                "broker_kind": "jms",
                "broker_name": q.broker,
                "queue_name": q.name,
                "message_id": m.message_id,
                "classification": classification,
                "reason": reason,
                "failure_class": worst_class(m.classes),
                "failure_count": m.failures,
                "scenario": m.scenario,
            }
        )

    def jms_message(self, m: JMessage, t: int) -> Generator[tuple[Any, ...], int, None]:
        """One message on one subscription: deliveries until acknowledged, expired or DLQ."""
        rng = self.rng
        q = m.queue
        m.enqueued_us = t
        q.inqueue[m.message_id] = m
        t += rr(rng, 1 * MS, 50 * MS)
        for step, err, server in m.fate:
            if step == "L":  # delivered, but the consumer died before logging anything
                m.deliveries += 1
                t += self.redelivery_delay(m.deliveries)
                continue
            if step == "X":  # expired (heartbeats): the broker drops it
                q.inqueue.pop(m.message_id, None)
                break
            res = yield (t, JMS, m, step, err, server)
            if res == FROZEN or step == "A":
                break
            if m.deliveries >= self.jms_mda:
                self.dead_letter(m, res)
                break
            t = res + self.redelivery_delay(m.deliveries) + rr(rng, 0, 40 * MS)
        self.finish_jms(m)

    def redelivery_delay(self, failures: int) -> int:
        """Artemis: redelivery-delay × multiplier^(n-1), capped (seeds/failure_policies.csv)."""
        return min(
            int(REDELIVERY_DELAY_MS * MS * REDELIVERY_MULTIPLIER ** max(0, failures - 1)),
            MAX_REDELIVERY_DELAY_MS * MS,
        )

    def dead_letter(self, m: JMessage, t: int) -> None:
        q = m.queue
        q.inqueue.pop(m.message_id, None)
        reset = m.scenario == "jms-max-deliveries-mixed" or (
            m.scenario is None and self.rng.random() < 0.3
        )
        letter = DeadLetter(m.message_id, m.group_id, m.type_name, m.body, q.address, q.name)
        self.dlq.setdefault(q.broker, {})[(m.message_id, q.name)] = (
            letter,
            t + 5 * MS,
            0 if reset else m.deliveries,
        )

    # ------------------------------------------------------------------ labels, snapshots

    def write_label(self, label: dict[str, Any]) -> None:
        if label.get("scenario") is None:
            label.pop("scenario", None)
        self.labels_fh.write(json.dumps(label, ensure_ascii=False) + "\n")
        if label["kind"] == "message":
            self.label_counts[("message", label["classification"], label["reason"])] += 1
        elif label["kind"] == "queue":
            self.label_counts[("queue", "disabled" if label["is_disabled"] else "enabled", "")] += 1
        else:
            self.label_counts[
                (
                    "consumer",
                    "tripped" if label["is_tripped"] else "not tripped",
                    label["trip_reason"] or "",
                )
            ] += 1

    def snapshot(self, t: int) -> None:
        for q in self.sb_queues:
            at = dotnet_time(t, q.offset_style)
            self.w.ssb_states.write(
                (
                    at,
                    q.server,
                    q.database,
                    q.name,
                    not (q.disabled and q.disabled_at is not None and q.disabled_at < t),
                    True,
                    True,
                    q.poison_message_handling,
                    q.activation_procedure,
                    q.max_readers,
                )
            )
            for m in q.inqueue.values():
                # A group's messages are registered when its process is created, which can be
                # ahead of the snapshot: a queue only shows what was enqueued by then.
                if m.enqueued_us > t:
                    continue
                self.w.ssb_snapshots.write(
                    (
                        at,
                        q.server,
                        q.database,
                        q.name,
                        1,
                        5,
                        m.queuing_order,
                        m.group_id,
                        m.handle,
                        m.seq,
                        q.service,
                        q.contract,
                        m.type_name,
                        m.validation,
                        m.encoded_body(),
                        dotnet_time(m.enqueued_us, q.offset_style),
                    )
                )
        for jq in self.jms_queues:
            # What a collect reads from the broker beside each browse.
            self.w.jms_settings.write(
                (
                    t,
                    jq.broker,
                    jq.address,
                    jq.name,
                    self.jms_mda,
                    REDELIVERY_DELAY_MS,
                    REDELIVERY_MULTIPLIER,
                    MAX_REDELIVERY_DELAY_MS,
                    "DLQ",
                )
            )
            for m in jq.inqueue.values():
                if m.enqueued_us > t:
                    continue
                self.w.jms_snapshots.write(
                    self.jms_snapshot_row(
                        t,
                        jq.broker,
                        jq.address,
                        jq.name,
                        m,
                        m.enqueued_us,
                        m.deliveries,
                        None,
                        None,
                    )
                )
        for broker in sorted(self.dlq):
            entries = self.dlq[broker]
            for key in [k for k, v in entries.items() if v[1] < t - DLQ_RETENTION_US]:
                del entries[key]
            for (_mid, _qn), (m, moved, dc) in entries.items():
                if moved <= t:
                    self.w.jms_snapshots.write(
                        self.jms_snapshot_row(
                            t, broker, "DLQ", "DLQ", m, moved, dc, m.address, m.queue_name
                        )
                    )

    @staticmethod
    def jms_snapshot_row(
        t: int,
        broker: str,
        address: str,
        queue: str,
        m: JMessage | DeadLetter,
        enqueued: int,
        dc: int,
        orig_address: str | None,
        orig_queue: str | None,
    ) -> tuple[Any, ...]:
        props: dict[str, Any] = {"JMSXDeliveryCount": dc}
        if orig_address is not None:
            props["_AMQ_ORIG_ADDRESS"] = orig_address
            props["_AMQ_ORIG_QUEUE"] = orig_queue
        if m.group_id is not None:
            props["JMSXGroupID"] = m.group_id
        return (
            t,
            broker,
            address,
            queue,
            m.message_id,
            enqueued,
            dc,
            4,
            m.group_id,
            orig_address,
            orig_queue,
            m.type_name,
            m.body,
            json.dumps(props, ensure_ascii=False, sort_keys=True),
        )

    def snapshots(self, times: list[int]) -> Iterator[tuple[Any, ...]]:
        for at in times:
            t = yield (at, TICK)
            self.snapshot(t)

    def finish(self) -> None:
        self.clock += 60_000_000
        self.snapshot(self.clock)
        for q in self.sb_queues:
            latest_disabled = q.disabled or (q.poison_message_handling and q.run >= 5)
            self.write_label(
                {
                    "kind": "queue",
                    "server_name": q.server,
                    "database_name": q.database,
                    "queue_name": q.name,
                    "is_disabled": latest_disabled,
                    "loops_forever_risk": not q.poison_message_handling,
                }
            )
        self.consumer_labels()
        for c in self.consumers.values():
            for server in c.servers:
                run = c.runs[server]
                if run.act_window >= 0:
                    self.close_activation(c, server, run, final=True)
        self.labels_fh.close()

    def consumer_labels(self) -> None:
        tripped_groups = {
            c.policy.scheduled_group
            for c in self.consumers.values()
            if c.tripped_itself and c.policy.scheduled_group
        }
        for cid in sorted(self.consumers):
            c = self.consumers[cid]
            if not any(r.act_window >= 0 for r in c.runs.values()):
                continue  # no attempts: no label
            if c.tripped_itself:
                n = c.policy.same_type_threshold
                same = any(r.reported and r.longest_same >= n for r in c.runs.values())
                reason: str | None = "same_exception_type" if same else "any_exception_types"
            elif c.policy.scheduled_group in tripped_groups:
                reason = "scheduled_group"
            else:
                reason = None
            self.write_label(
                {
                    "kind": "consumer",
                    "consumer_id": cid,
                    "is_tripped": reason is not None,
                    "trip_reason": reason,
                }
            )
