"""JMS remediation actions on a live ActiveMQ Artemis broker, through its management API
(Jolokia), exactly once.

Artemis moves one message in a broker transaction of its own (the queue MBean's operations):
- `dead_letter`: `sendMessageToDeadLetterAddress`, the broker's own dead-letter routing (the
  address's dead-letter-address and its auto-created dead-letter queue);
- `retry_from_dlq`: `retryMessage`, back to the queue in the message's `_AMQ_ORIG_QUEUE` (seed
  002's group operation); of several copies of one message in a dead-letter queue, the one whose
  original queue is the action's;
- `park`: `moveMessage` to `<queue><jms_park_queue_suffix>` (created when missing);
- `discard`: `removeMessage`;
- `pause_queue`: the queue's `pause(true)`, kept across broker restarts (a tripped breaker whose
  consumer platform cannot be reached); `resume_queue` undoes it for `poisonwatch resume`.
  Pausing is idempotent, so the queue's own state is its exactly-once record: a re-run that
  finds it paused pauses it again (persistently) and reports `already_applied`. Only a durable
  queue keeps the pause across a restart.

A management call cannot share a transaction with a second one, so exactly once rests on an
intent marker and on where the message is:
1. the message is looked up in its queue: by its JMSMessageID (Artemis' user id, which a move
   keeps) or, for a message sent without one, by the broker's message id;
2. a durable marker carrying the action id goes to the journal queue `poisonwatch.actions`;
3. the broker step;
4. `poisonwatch apply` writes its ledger; then the marker is removed (`forget`, and `prune` of
   the markers of committed actions before each run).
A re-run that finds the marker and not the message in its queue reports `already_applied`: the
earlier run moved it and died before its ledger write (kill -9, a broker restart). Marker and
message both there: the earlier run died before the step, and this run takes it. A message in
delivery to a consumer is not in its queue's browse: `busy`, and the action stays pending.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from poisonwatch.broker.actions import (
    ACTION_PROPERTY,
    JOURNAL_QUEUE,
    SOURCE_ID_PROPERTY,
    SOURCE_QUEUE_PROPERTY,
    LiveAction,
    Outcome,
    ParkRecord,
    Release,
    names_refusal,
    park_suffix,
    refused_queue,
)
from poisonwatch.broker.artemis import ArtemisQueue, JolokiaClient
from poisonwatch.broker.client import BrokerError, BrokerGoneError, selector_string
from poisonwatch.broker.profiles import BrokerTarget
from poisonwatch.config import crash_point

ORIG_QUEUE = "_AMQ_ORIG_QUEUE"
ORIG_MESSAGE_ID = "_AMQ_ORIG_MESSAGE_ID"
# Markers removed per removeMessages call (one filter of `IN (...)`).
PRUNE_CHUNK = 100


def _queue_config(name: str) -> str:
    return json.dumps({"name": name, "address": name, "routing-type": "ANYCAST", "durable": True})


def _orig_queue(msg: dict[str, Any]) -> str | None:
    props = msg.get("StringProperties")
    value = props.get(ORIG_QUEUE) if isinstance(props, dict) else None
    return value if isinstance(value, str) else None


class ArtemisActions:
    """The live actions of `poisonwatch apply` on one Artemis broker (see the module)."""

    def __init__(self, target: BrokerTarget, client: JolokiaClient | None = None) -> None:
        self.target = target
        self.client = client or JolokiaClient(target)
        self._queues: dict[str, ArtemisQueue] = {}

    def close(self) -> None:
        """Nothing to close: every Jolokia request is a connection of its own."""

    # --- queues ------------------------------------------------------------------------------

    def queue(self, name: str) -> ArtemisQueue | None:
        if name not in self._queues:
            self._queues = {q.name: q for q in self.client.queues()}
        return self._queues.get(name)

    def ensure_queue(self, name: str) -> ArtemisQueue:
        """The anycast queue `name` on an address of its own, created durable when missing."""
        found = self.queue(name)
        if found is None:
            self.client.exec(
                self.client.broker_mbean(),
                "createQueue(java.lang.String,boolean)",
                _queue_config(name),
                True,
            )
            self._queues.clear()
            found = self.queue(name)
        if found is None:
            raise BrokerError(f"{self.target.name}: queue {name!r} could not be created")
        return found

    # --- the journal ----------------------------------------------------------------------------

    def _journal_filter(self, action_ids: list[str]) -> str:
        return f"{ACTION_PROPERTY} in ({', '.join(selector_string(a) for a in action_ids)})"

    def journal_has(self, action_id: str) -> bool:
        journal = self.queue(JOURNAL_QUEUE)
        if journal is None:
            return False
        count = self.client.exec(
            journal.mbean,
            "countMessages(java.lang.String)",
            f"{ACTION_PROPERTY} = {selector_string(action_id)}",
        )
        return bool(count)

    def journal_ids(self) -> list[str]:
        journal = self.queue(JOURNAL_QUEUE)
        if journal is None:
            return []
        return [
            str((m.get("StringProperties") or {}).get(ACTION_PROPERTY, ""))
            for m in self.client.browse(journal)
        ]

    def _mark(self, action: LiveAction) -> None:
        journal = self.ensure_queue(JOURNAL_QUEUE)
        headers = {
            ACTION_PROPERTY: action.action_id,
            SOURCE_ID_PROPERTY: action.message_id,
            SOURCE_QUEUE_PROPERTY: action.queue_name,
            "poisonwatch_action_type": action.action_type,
        }
        self.client.exec(
            journal.mbean,
            "sendMessage(java.util.Map,int,java.lang.String,boolean,java.lang.String,"
            "java.lang.String)",
            headers,
            0,
            None,
            True,
            self.target.user,
            self.target.password,
        )

    def prune(self, action_ids: set[str]) -> int:
        """Remove the journal markers of these actions; how many."""
        journal = self.queue(JOURNAL_QUEUE)
        if journal is None or not action_ids:
            return 0
        ids = sorted(action_ids)
        removed = 0
        for start in range(0, len(ids), PRUNE_CHUNK):
            chunk = ids[start : start + PRUNE_CHUNK]
            removed += int(
                self.client.exec(
                    journal.mbean,
                    "removeMessages(java.lang.String)",
                    self._journal_filter(chunk),
                )
                or 0
            )
        return removed

    # --- finding a message ----------------------------------------------------------------------

    def locate(
        self, queue: ArtemisQueue, message_id: str, orig_queue: str | None = None
    ) -> dict[str, Any] | None:
        """The message in `queue` (not in delivery), by JMSMessageID or broker id; with
        `orig_queue`, the copy that came from that queue."""
        if message_id.startswith("ID:"):
            found = self.client.browse(queue, f"AMQUserID = {selector_string(message_id)}")
        else:
            found = [m for m in self.client.browse(queue) if str(m.get("messageID")) == message_id]
        if orig_queue:
            found = [m for m in found if _orig_queue(m) in (orig_queue, None)]
        return found[0] if found else None

    def delivering(self, queue: ArtemisQueue, message_id: str) -> bool:
        """Whether a consumer holds the message now (delivered, not yet acknowledged)."""
        raw = self.client.exec(queue.mbean, "listDeliveringMessagesAsJSON()")
        try:
            consumers = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return False
        for consumer in consumers if isinstance(consumers, list) else []:
            for m in consumer.get("elements", []) if isinstance(consumer, dict) else []:
                if isinstance(m, dict) and message_id in (
                    str(m.get("userID")),
                    str(m.get("messageID")),
                ):
                    return True
        return False

    # --- one action -----------------------------------------------------------------------------

    def refusal(self, action: LiveAction) -> str | None:
        if action.action_type == "pause_queue":
            return refused_queue(action.queue_name, "source")
        if action.action_type not in ("dead_letter", "retry_from_dlq", "park", "discard"):
            return f"refused: not a live broker action type: {action.action_type}"
        dest = action.queue_name + park_suffix() if action.action_type == "park" else None
        why = names_refusal(action, dest)
        if why:
            return why
        if action.action_type == "retry_from_dlq" and not action.orig_queue:
            return "no original queue known for this dead-lettered message"
        return None

    def _step(self, queue: ArtemisQueue, msg: dict[str, Any], action: LiveAction) -> bool:
        """The broker step; False when the message was not there to take (gone into delivery)."""
        long_id = int(str(msg["messageID"]))
        if action.action_type == "dead_letter":
            op, args = "sendMessageToDeadLetterAddress(long)", [long_id]
        elif action.action_type == "retry_from_dlq":
            op, args = "retryMessage(long)", [long_id]
        elif action.action_type == "park":
            holding = self.ensure_queue(action.queue_name + park_suffix())
            op, args = "moveMessage(long,java.lang.String)", [long_id, holding.name]
        else:
            op, args = "removeMessage(long)", [long_id]
        return bool(self.client.exec(queue.mbean, op, *args))

    def execute(self, action: LiveAction) -> Outcome:
        """Run one action (see the module). `BrokerGoneError` propagates: the caller stops and
        a re-run settles the action from the journal and the message's place."""
        why = self.refusal(action)
        if why:
            return Outcome(action, "failed", why)
        if action.action_type == "pause_queue":
            return self._pause(action)
        queue = self.queue(action.queue_name)
        marked = self.journal_has(action.action_id)
        orig = action.orig_queue if action.action_type == "retry_from_dlq" else None
        msg = self.locate(queue, action.message_id, orig) if queue else None
        dest = self._destination(action, queue, msg)
        if msg is None or queue is None:
            if marked:
                return Outcome(
                    action,
                    "already_applied",
                    f"an earlier run's intent is in the journal and the message has left "
                    f"{action.queue_name}",
                    dest,
                )
            if queue is not None and self.delivering(queue, action.message_id):
                return Outcome(
                    action, "busy", f"message is being delivered to a consumer of {queue.name}"
                )
            where = f" from {action.orig_queue}" if orig else ""
            return Outcome(
                action,
                "failed",
                f"message {action.message_id}{where} is not in queue {action.queue_name}",
            )
        if not marked:
            self._mark(action)
        crash_point("artemis:after_intent")
        if not self._step(queue, msg, action):
            self.prune({action.action_id})
            return Outcome(
                action, "busy", f"message went into delivery to a consumer of {queue.name}"
            )
        return Outcome(action, "applied", f"moved to {dest}" if dest else "discarded", dest)

    # --- whole queues ---------------------------------------------------------------------------

    def _queue_state(self, name: str) -> tuple[ArtemisQueue, bool] | None:
        """The queue, listed afresh, and whether it is paused; None when the broker has none."""
        self._queues.clear()
        queue = self.queue(name)
        return None if queue is None else (queue, bool(self.client.read(queue.mbean, "Paused")))

    def is_paused(self, name: str) -> bool | None:
        """Whether the queue is paused; None when the broker has no such queue."""
        state = self._queue_state(name)
        return None if state is None else state[1]

    def _pause(self, action: LiveAction) -> Outcome:
        state = self._queue_state(action.queue_name)
        if state is None:
            return Outcome(action, "failed", f"queue {action.queue_name} is not on the broker")
        queue, paused = state
        # Also on a queue paused already: someone's pause(false) would end at the next restart.
        self.client.exec(queue.mbean, "pause(boolean)", True)
        crash_point("artemis:after_pause")
        if paused:
            return Outcome(action, "already_applied", f"queue {action.queue_name} is paused")
        return Outcome(action, "applied", f"paused {action.queue_name} (kept across restarts)")

    def resume_queue(self, name: str) -> bool:
        """Resume a paused queue; whether it was paused. Raises when there is no such queue."""
        state = self._queue_state(name)
        if state is None:
            raise BrokerError(f"{self.target.name}: no queue {name!r} on the broker")
        queue, paused = state
        if paused:
            self.client.exec(queue.mbean, "resume()")
        return paused

    def _destination(
        self, action: LiveAction, queue: ArtemisQueue | None, msg: dict[str, Any] | None
    ) -> str | None:
        if action.action_type == "park":
            return action.queue_name + park_suffix()
        if action.action_type == "retry_from_dlq":
            return (msg and _orig_queue(msg)) or action.orig_queue
        if action.action_type == "dead_letter" and queue is not None:
            dla = self.client.address_settings(queue.address).get("deadLetterAddress")
            return str(dla) if dla else None
        return None

    # --- parked messages ------------------------------------------------------------------------

    def release_parked(self, parked: list[ParkRecord], now: dt.datetime | None = None) -> Release:
        """Move parked messages whose due time has passed back to the queue their park action
        recorded in the ledger (`parked`), one broker transaction each; a message's own
        properties choose nothing. Found in the holding queue by JMSMessageID or, for a message
        without one, by the id and queue Artemis recorded when it moved it there."""
        now_text = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        out = Release([], [])
        for record in parked:
            if record.due_at > now_text:
                continue
            why = refused_queue(record.holding_queue, "holding") or refused_queue(
                record.queue_name, "release"
            )
            if why or not record.holding_queue.endswith(park_suffix()):
                out.failures.append(f"{record.action_id}: {why or 'not a holding queue'}")
                continue
            try:
                if self._release_one(record):
                    out.released.append(record.queue_name)
            except BrokerGoneError:
                raise
            except BrokerError as exc:
                out.failures.append(f"{record.action_id}: {exc}")
        return out

    def _release_one(self, record: ParkRecord) -> bool:
        holding = self.queue(record.holding_queue)
        back = self.queue(record.queue_name)
        if holding is None or back is None or not record.message_id:
            return False
        if record.message_id.startswith("ID:"):
            selector = f"AMQUserID = {selector_string(record.message_id)}"
        elif record.message_id.isdigit():
            selector = (
                f"{ORIG_MESSAGE_ID} = {record.message_id} and "
                f"{ORIG_QUEUE} = {selector_string(record.queue_name)}"
            )
        else:
            return False
        found = self.client.browse(holding, selector)
        if not found:
            return False
        return bool(
            self.client.exec(
                holding.mbean,
                "moveMessage(long,java.lang.String)",
                int(str(found[0]["messageID"])),
                back.name,
            )
        )
