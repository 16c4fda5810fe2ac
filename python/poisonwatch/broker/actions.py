"""JMS remediation actions executed on a live ActiveMQ Classic broker, exactly once.

Per action, one broker transaction: take the one message by `JMSMessageID = '<id>'` (client
acknowledgement, prefetch 1), SEND it on (DLQ, original queue, holding queue; nothing for
discard), SEND a marker to the journal queue `poisonwatch.actions`, ACK the message, COMMIT and
wait for the broker's receipt. The caller (`poisonwatch apply`) writes its ledger after that.

Exactly once without a distributed transaction: the marker, carrying `poisonwatch_action_id`,
commits atomically with the move. Before acting, the journal is searched for the action id:
found means a previous run moved the message and died before its ledger write (kill -9, broker
restart) - the action is reported `already_applied` and only the ledger is written. A transaction
cut by a crash is rolled back by the broker (the message stays where it was) and the re-run
moves it. Markers of committed ledger rows are removed by `prune_journal`.

Moved messages get a new JMSMessageID from the broker (STOMP cannot keep it); the original id
travels in the property `poisonwatch_source_message_id`, the action id in
`poisonwatch_action_id`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from poisonwatch.broker.client import (
    BrokerMessage,
    BrokerRefusedError,
    StompClient,
    selector_string,
)
from poisonwatch.broker.profiles import BrokerTarget

LIVE_ACTION_TYPES = ("dead_letter", "retry_from_dlq", "park", "discard")
JOURNAL_QUEUE = "poisonwatch.actions"
ACTION_PROPERTY = "poisonwatch_action_id"
SOURCE_ID_PROPERTY = "poisonwatch_source_message_id"
SOURCE_QUEUE_PROPERTY = "poisonwatch_source_queue"
PARK_QUEUE_PROPERTY = "poisonwatch_park_queue"
PARK_DUE_PROPERTY = "poisonwatch_park_due_at"
PARK_SUFFIX = ".parked"
# Properties the broker adds on redelivery / dead-lettering: not carried to the next queue.
_DROPPED_PROPERTIES = frozenset(
    {
        "scheduledJobId",
        "redeliveryDelay",
        "originalExpiration",
        "dlqDeliveryFailureCause",
        "original-destination",
        "AMQ_SCHEDULED_DELAY",
        "AMQ_SCHEDULED_PERIOD",
        "AMQ_SCHEDULED_REPEAT",
        "AMQ_SCHEDULED_CRON",
        "AMQ_SCHEDULED_ID",
        ACTION_PROPERTY,
    }
)


@dataclass(frozen=True)
class LiveAction:
    action_id: str
    action_type: str
    broker_name: str
    queue_name: str
    message_id: str
    orig_queue: str | None = None
    park_delay_minutes: int | None = None
    reason: str | None = None

    @staticmethod
    def from_row(row: dict[str, Any]) -> LiveAction:
        return LiveAction(
            action_id=str(row["action_id"]),
            action_type=str(row["action_type"]),
            broker_name=str(row["broker_name"]),
            queue_name=str(row["queue_name"]),
            message_id=str(row["message_id"]),
            orig_queue=row.get("orig_queue"),
            park_delay_minutes=(
                int(row["park_delay_minutes"])
                if row.get("park_delay_minutes") is not None
                else None
            ),
            reason=row.get("reason"),
        )


@dataclass
class Outcome:
    action: LiveAction
    status: str  # applied | already_applied | failed | busy
    detail: str = ""
    target_queue: str | None = None

    @property
    def done(self) -> bool:
        return self.status in ("applied", "already_applied")


def target_queue(target: BrokerTarget, action: LiveAction) -> str | None:
    if action.action_type == "dead_letter":
        return target.dlq_for(action.queue_name)
    if action.action_type == "retry_from_dlq":
        return action.orig_queue or None
    if action.action_type == "park":
        return action.queue_name + PARK_SUFFIX
    if action.action_type == "discard":
        return None
    raise ValueError(f"not a live broker action type: {action.action_type}")


def _send_headers(msg: BrokerMessage, action: LiveAction, extra: dict[str, str]) -> dict[str, str]:
    headers = {k: v for k, v in msg.properties.items() if k not in _DROPPED_PROPERTIES}
    for name in ("type", "correlation-id", "priority", "reply-to"):
        if msg.headers.get(name):
            headers[name] = msg.headers[name]
    headers["persistent"] = "true"
    try:
        msg.body.decode("utf-8")
        headers.setdefault("amq-msg-type", "text")
    except UnicodeDecodeError:
        headers["amq-msg-type"] = "bytes"
    headers[SOURCE_ID_PROPERTY] = msg.properties.get(SOURCE_ID_PROPERTY) or msg.message_id
    headers[SOURCE_QUEUE_PROPERTY] = msg.queue
    headers[ACTION_PROPERTY] = action.action_id
    headers.update(extra)
    return headers


def journal_has(client: StompClient, action_id: str) -> bool:
    return bool(client.find(JOURNAL_QUEUE, f"{ACTION_PROPERTY} = {selector_string(action_id)}"))


def execute(
    client: StompClient, target: BrokerTarget, action: LiveAction, wait: float = 5.0
) -> Outcome:
    """Run one action on the broker (see the module docstring). `BrokerGoneError` propagates: the
    caller stops and a re-run settles the action from the journal."""
    if journal_has(client, action.action_id):
        return Outcome(action, "already_applied", "found in the broker's action journal")
    dest = target_queue(target, action)
    if action.action_type == "retry_from_dlq" and not dest:
        return Outcome(action, "failed", "no original queue known for this dead-lettered message")
    selector = f"JMSMessageID = {selector_string(action.message_id)}"
    taken = client.take(action.queue_name, selector, wait=wait)
    if taken is None:
        if client.find(action.queue_name, selector):
            return Outcome(
                action, "busy", f"message is being delivered to a consumer of {action.queue_name}"
            )
        return Outcome(
            action, "failed", f"message {action.message_id} is not in queue {action.queue_name}"
        )
    sub, frame = taken
    msg = BrokerMessage(action.queue_name, dict(frame.headers), bytes(frame.body or b""))
    extra: dict[str, str] = {}
    if action.action_type == "dead_letter":
        extra["original-destination"] = f"/queue/{action.queue_name}"
        extra["dlqDeliveryFailureCause"] = f"poisonwatch: {action.reason or 'poison'}"
    elif action.action_type == "park":
        due = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=action.park_delay_minutes or 0)
        extra[PARK_QUEUE_PROPERTY] = action.queue_name
        extra[PARK_DUE_PROPERTY] = due.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    tx = client.begin()
    try:
        if dest:
            client.send(dest, msg.body, _send_headers(msg, action, extra), tx=tx)
        client.send(
            JOURNAL_QUEUE,
            b"",
            {
                "persistent": "true",
                ACTION_PROPERTY: action.action_id,
                SOURCE_ID_PROPERTY: action.message_id,
                SOURCE_QUEUE_PROPERTY: action.queue_name,
                "poisonwatch_action_type": action.action_type,
            },
            tx=tx,
        )
        client.ack(frame, tx=tx)
        client.commit(tx)
    except BrokerRefusedError as exc:
        client.abort(tx)
        client.release(sub)
        return Outcome(action, "failed", f"broker refused: {exc}", dest)
    client.release(sub)
    return Outcome(action, "applied", f"moved to {dest}" if dest else "discarded", dest)


def prune_journal(client: StompClient, committed: set[str], wait: float = 2.0) -> int:
    """Remove journal markers whose action the ledger has committed; returns how many."""
    present = [m.properties.get(ACTION_PROPERTY, "") for m in client.browse(JOURNAL_QUEUE)]
    todo = [a for a in present if a in committed]
    removed = 0
    for action_id in todo:
        taken = client.take(
            JOURNAL_QUEUE, f"{ACTION_PROPERTY} = {selector_string(action_id)}", wait=wait
        )
        if taken is None:
            continue
        sub, frame = taken
        client.ack(frame)
        client.release(sub)
        removed += 1
    if removed:
        client.sync("journal pruning")
    return removed


def release_parked(
    client: StompClient, target: BrokerTarget, now: dt.datetime | None = None
) -> list[str]:
    """Send parked messages whose due time has passed back to their queue (one transaction
    each: ack from the holding queue + send to the queue). Returns the queues touched."""
    now_text = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    listed = client.list_queues() or []
    touched = []
    for holding in [q for q in listed if q.endswith(PARK_SUFFIX)]:
        for msg in list(client.browse(holding)):
            due = msg.properties.get(PARK_DUE_PROPERTY, "")
            back = msg.properties.get(PARK_QUEUE_PROPERTY)
            if not back or not due or due > now_text:
                continue
            taken = client.take(holding, f"JMSMessageID = {selector_string(msg.message_id)}")
            if taken is None:
                continue
            sub, frame = taken
            headers = {
                k: v
                for k, v in msg.properties.items()
                if k not in (PARK_DUE_PROPERTY, PARK_QUEUE_PROPERTY)
            }
            headers["persistent"] = "true"
            tx = client.begin()
            client.send(back, msg.body, headers, tx=tx)
            client.ack(frame, tx=tx)
            client.commit(tx)
            client.release(sub)
            touched.append(back)
    return touched
