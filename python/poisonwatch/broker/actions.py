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

Frames are built from validated parts only: every queue an action names or sends to must name
exactly one queue (`client.queue_name_problem`, and never the journal), a message's properties
are copied only under names that are JMS identifiers and not a header STOMP, ActiveMQ or the
action itself sets (the others are left out and named in `poisonwatch_dropped_properties`, a
JSON list), and a parked message goes back only to the queue its park action recorded in the
ledger.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from poisonwatch.broker.client import (
    BrokerError,
    BrokerGoneError,
    BrokerMessage,
    BrokerRefusedError,
    StompClient,
    queue_name_problem,
    selector_string,
)
from poisonwatch.broker.profiles import BrokerTarget
from poisonwatch.config import project_var

LIVE_ACTION_TYPES = ("dead_letter", "retry_from_dlq", "park", "discard")
# Actions on a whole queue, not a message: live on Artemis only (STOMP cannot pause a queue).
QUEUE_ACTION_TYPES = ("pause_queue",)
JOURNAL_QUEUE = "poisonwatch.actions"
ACTION_PROPERTY = "poisonwatch_action_id"
SOURCE_ID_PROPERTY = "poisonwatch_source_message_id"
SOURCE_QUEUE_PROPERTY = "poisonwatch_source_queue"
PARK_QUEUE_PROPERTY = "poisonwatch_park_queue"
PARK_DUE_PROPERTY = "poisonwatch_park_due_at"
DROPPED_PROPERTY = "poisonwatch_dropped_properties"
# JMS property name rules: an identifier, not a selector keyword, not a JMS-reserved `JMS` name.
_JMS_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*\Z")
_SELECTOR_WORDS = frozenset(
    {"NULL", "TRUE", "FALSE", "NOT", "AND", "OR", "BETWEEN", "LIKE", "IN", "IS", "ESCAPE"}
)
# JMSX properties ActiveMQ reads from a SEND frame and that mean the same on the next queue.
_JMSX_CARRIED = frozenset({"JMSXGroupID", "JMSXGroupSeq"})
# Identifier-shaped headers that STOMP or ActiveMQ read on a SEND frame (and the MESSAGE frame
# headers the broker writes): a message never chooses them.
_FRAME_HEADERS = frozenset(
    {
        "destination",
        "transaction",
        "receipt",
        "subscription",
        "ack",
        "id",
        "selector",
        "persistent",
        "priority",
        "expires",
        "type",
        "browser",
        "transformation",
        "host",
        "login",
        "passcode",
        "version",
        "session",
        "server",
        "redelivered",
        "timestamp",
        "message",
    }
)
# Properties poisonwatch writes itself on every move (recomputed, never copied).
_OWN_PROPERTIES = frozenset(
    {
        "poisonwatch_action_id",
        "poisonwatch_source_message_id",
        "poisonwatch_source_queue",
        "poisonwatch_park_queue",
        "poisonwatch_park_due_at",
        DROPPED_PROPERTY,
    }
)
_REPLY_TO = re.compile(r"/(queue|topic|temp-queue|temp-topic)/[^\x00-\x1f\x7f,*>?]+\Z")
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
            message_id=str(row.get("message_id") or ""),
            orig_queue=row.get("orig_queue"),
            park_delay_minutes=(
                int(row["park_delay_minutes"])
                if row.get("park_delay_minutes") is not None
                else None
            ),
            reason=row.get("reason"),
        )


def is_live_action(action: dict[str, Any], brokers: dict[str, BrokerTarget]) -> bool:
    """Whether `apply --yes` runs this action on a connected broker (`brokers`: name → target):
    a JMS message action on either kind, a queue action on Artemis; the rest are scripts."""
    target = brokers.get(str(action.get("broker_name")))
    if action.get("broker_kind") != "jms" or target is None:
        return False
    if action.get("action_type") in QUEUE_ACTION_TYPES:
        return target.kind == "artemis" and bool(action.get("queue_name"))
    return action.get("action_type") in LIVE_ACTION_TYPES and bool(action.get("message_id"))


@dataclass
class Outcome:
    action: LiveAction
    status: str  # applied | already_applied | failed | busy
    detail: str = ""
    target_queue: str | None = None

    @property
    def done(self) -> bool:
        return self.status in ("applied", "already_applied")


def property_name_problem(name: str) -> str | None:
    """Why a message property must not be copied under `name` into a SEND frame, or None."""
    if not _JMS_IDENTIFIER.match(name):
        return "not a JMS identifier"
    if name.upper() in _SELECTOR_WORDS:
        return "a JMS selector keyword"
    if name.startswith("JMS") and name not in _JMSX_CARRIED:
        return "a JMS-reserved name"
    if name in _FRAME_HEADERS:
        return "a STOMP/ActiveMQ frame header"
    if name.startswith("poisonwatch_"):
        return "a poisonwatch property"
    return None


def refused_queue(name: str | None, role: str) -> str | None:
    """Why an action must not name `name` as its `role` queue (None: fine)."""
    if name is None:
        return None
    problem = queue_name_problem(name)
    if problem:
        return f"refused: the {role} queue is {problem}"
    if name == JOURNAL_QUEUE or name.startswith(JOURNAL_QUEUE + park_suffix()):
        return f"refused: the {role} queue is poisonwatch's own journal {JOURNAL_QUEUE}"
    return None


def park_suffix() -> str:
    """What a queue's parking queue adds to its name (var jms_park_queue_suffix)."""
    return str(project_var("jms_park_queue_suffix"))


def target_queue(target: BrokerTarget, action: LiveAction) -> str | None:
    if action.action_type == "dead_letter":
        return target.dlq_for(action.queue_name)
    if action.action_type == "retry_from_dlq":
        return action.orig_queue or None
    if action.action_type == "park":
        return action.queue_name + park_suffix()
    if action.action_type == "discard":
        return None
    raise ValueError(f"not a live broker action type: {action.action_type}")


def copied_properties(
    properties: dict[str, str], set_here: set[str]
) -> tuple[dict[str, str], list[str]]:
    """(properties safe to copy into a SEND frame, names left out). `set_here` are the headers
    the action sets itself: a message never chooses those either."""
    kept: dict[str, str] = {}
    dropped: list[str] = []
    for name, value in properties.items():
        if name in _DROPPED_PROPERTIES or name in _OWN_PROPERTIES:
            continue  # the broker's or poisonwatch's: rewritten on this move, not carried
        if (
            property_name_problem(name)
            or name in set_here
            or "\x00" in value
            or (name == "JMSXGroupSeq" and not value.isdigit())
        ):
            dropped.append(name)
            continue
        kept[name] = value
    return kept, sorted(dropped)


def _previously_dropped(properties: dict[str, str]) -> list[str]:
    try:
        names = json.loads(properties.get(DROPPED_PROPERTY) or "[]")
    except ValueError:
        return []
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


def _carried_headers(msg: BrokerMessage, set_here: set[str]) -> dict[str, str]:
    """What a move carries from `msg`: its copyable properties, its JMS type, correlation id,
    priority and reply-to when well-formed, and the names left out (`DROPPED_PROPERTY`)."""
    set_here = set_here | {"persistent", "amq-msg-type", "type", "correlation-id"}
    set_here |= {"priority", "reply-to", *_OWN_PROPERTIES}
    headers, dropped = copied_properties(msg.properties, set_here)
    for name in ("type", "correlation-id"):
        if msg.headers.get(name) and "\x00" not in msg.headers[name]:
            headers[name] = msg.headers[name]
    if msg.headers.get("priority", "") in {str(i) for i in range(10)}:
        headers["priority"] = msg.headers["priority"]
    reply_to = msg.headers.get("reply-to")
    if reply_to:
        if _REPLY_TO.match(reply_to):
            headers["reply-to"] = reply_to
        else:
            dropped.append("reply-to")
    dropped = sorted(set(dropped) | set(_previously_dropped(msg.properties)))
    if dropped:
        headers[DROPPED_PROPERTY] = json.dumps(dropped, ensure_ascii=False)
    headers["persistent"] = "true"
    try:
        msg.body.decode("utf-8")
        headers["amq-msg-type"] = "text"
    except UnicodeDecodeError:
        headers["amq-msg-type"] = "bytes"
    return headers


def _send_headers(msg: BrokerMessage, action: LiveAction, extra: dict[str, str]) -> dict[str, str]:
    headers = _carried_headers(msg, set(extra))
    carried = msg.properties.get(SOURCE_ID_PROPERTY, "")
    headers[SOURCE_ID_PROPERTY] = (
        carried
        if carried.startswith("ID:") and len(carried) < 300 and carried.isprintable()
        else msg.message_id
    )
    headers[SOURCE_QUEUE_PROPERTY] = msg.queue
    headers[ACTION_PROPERTY] = action.action_id
    headers.update(extra)
    return headers


def journal_has(client: StompClient, action_id: str) -> bool:
    return bool(client.find(JOURNAL_QUEUE, f"{ACTION_PROPERTY} = {selector_string(action_id)}"))


def refusal(target: BrokerTarget, action: LiveAction) -> str | None:
    """Why this action must not run at all (a queue that does not name exactly one queue, or the
    journal; an id a selector cannot carry), or None."""
    try:
        dest = target_queue(target, action)
    except ValueError as exc:
        return f"refused: {exc}"
    return names_refusal(action, dest)


def names_refusal(action: LiveAction, dest: str | None) -> str | None:
    """Why the action's queues (source, original, `dest`) or message id must not reach a
    broker, on either kind, or None."""
    for name, role in (
        (action.queue_name, "source"),
        (action.orig_queue, "original"),
        (dest, "destination"),
    ):
        why = refused_queue(name, role)
        if why:
            return why
    try:
        selector_string(action.message_id)
    except BrokerError as exc:
        return f"refused: {exc}"
    return None


def _take_copy(
    client: StompClient, action: LiveAction, selector: str, wait: float
) -> tuple[str, Any] | None:
    """Take the message for `action`; for retry_from_dlq, the copy whose original queue is the
    action's (multicast copies in one DLQ share a JMSMessageID): the other copies fetched on
    the way stay unacknowledged and go back to the DLQ when the subscription ends."""
    if action.action_type != "retry_from_dlq" or not action.orig_queue:
        return client.take(action.queue_name, selector, wait=wait)

    def fits(frame: Any, copies: int) -> bool:
        orig = BrokerMessage(action.queue_name, dict(frame.headers), b"").original_queue
        return orig == action.orig_queue or (orig is None and copies == 1)

    taken = client.take(action.queue_name, selector, wait=wait)
    if taken is None or fits(taken[1], 1):
        return taken
    client.release(taken[0])
    copies = len(client.find(action.queue_name, selector))
    return client.take_first(
        action.queue_name, selector, lambda f: fits(f, copies), max(copies, 1), wait=wait
    )


def execute(
    client: StompClient, target: BrokerTarget, action: LiveAction, wait: float = 5.0
) -> Outcome:
    """Run one action on the broker (see the module docstring). `BrokerGoneError` propagates: the
    caller stops and a re-run settles the action from the journal."""
    why = refusal(target, action)
    if why:
        return Outcome(action, "failed", why)
    if journal_has(client, action.action_id):
        return Outcome(action, "already_applied", "found in the broker's action journal")
    dest = target_queue(target, action)
    if action.action_type == "retry_from_dlq" and not dest:
        return Outcome(action, "failed", "no original queue known for this dead-lettered message")
    selector = f"JMSMessageID = {selector_string(action.message_id)}"
    taken = _take_copy(client, action, selector, wait)
    if taken is None:
        found = client.find(action.queue_name, selector)
        if action.action_type == "retry_from_dlq" and action.orig_queue:
            found = [m for m in found if m.original_queue in (action.orig_queue, None)]
        if found:
            return Outcome(
                action, "busy", f"message is being delivered to a consumer of {action.queue_name}"
            )
        where = f" from {action.orig_queue}" if action.action_type == "retry_from_dlq" else ""
        return Outcome(
            action,
            "failed",
            f"message {action.message_id}{where} is not in queue {action.queue_name}",
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


@dataclass(frozen=True)
class ParkRecord:
    """A committed park action as the ledger recorded it: where the message goes back to."""

    action_id: str
    queue_name: str
    holding_queue: str
    due_at: str  # UTC, %Y-%m-%dT%H:%M:%S.%fZ
    message_id: str = ""  # as the action named it (Artemis finds the held copy by it)


@dataclass
class Release:
    released: list[str]  # the queues messages went back to
    failures: list[str]  # one line per parked message that could not go back


def release_parked(
    client: StompClient,
    parked: list[ParkRecord],
    now: dt.datetime | None = None,
) -> Release:
    """Send parked messages whose due time has passed back to the queue their park action
    recorded in the ledger (`parked`), one transaction each: ack from the holding queue + send.
    A message's own properties choose nothing: one without a ledger record stays parked. A
    message that cannot go back is reported and the others still go; `BrokerGoneError`
    propagates."""
    now_text = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    by_action = {r.action_id: r for r in parked}
    out = Release([], [])
    done: set[str] = set()
    for holding in sorted({r.holding_queue for r in parked}):
        if refused_queue(holding, "holding") or not holding.endswith(park_suffix()):
            out.failures.append(f"{holding!r}: not a holding queue")
            continue
        for msg in list(client.browse(holding)):
            record = by_action.get(msg.properties.get(ACTION_PROPERTY, ""))
            if record is None or record.holding_queue != holding or record.action_id in done:
                continue
            if record.due_at > now_text:
                continue
            why = refused_queue(record.queue_name, "release")
            if why:
                out.failures.append(f"{record.action_id}: {why}")
                continue
            done.add(record.action_id)
            try:
                if _release_one(client, holding, record, msg):
                    out.released.append(record.queue_name)
            except BrokerGoneError:
                raise
            except BrokerError as exc:
                out.failures.append(f"{record.action_id}: {exc}")
    return out


def _release_one(client: StompClient, holding: str, record: ParkRecord, msg: BrokerMessage) -> bool:
    taken = client.take(holding, f"JMSMessageID = {selector_string(msg.message_id)}")
    if taken is None:
        return False
    sub, frame = taken
    taken_msg = BrokerMessage(holding, dict(frame.headers), bytes(frame.body or b""))
    headers = _carried_headers(taken_msg, set())
    for name in (ACTION_PROPERTY, SOURCE_ID_PROPERTY, SOURCE_QUEUE_PROPERTY):
        value = taken_msg.properties.get(name)
        if value and value.isprintable():
            headers[name] = value
    tx = client.begin()
    try:
        client.send(record.queue_name, taken_msg.body, headers, tx=tx)
        client.ack(frame, tx=tx)
        client.commit(tx)
    except BrokerRefusedError:
        client.abort(tx)
        raise
    finally:
        client.release(sub)
    return True


ParkLedger = Callable[[str], list[ParkRecord]]
