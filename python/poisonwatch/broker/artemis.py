"""ActiveMQ Artemis through its management API: Jolokia (JMX over HTTP) at the web console.

`JolokiaClient` posts Jolokia requests with basic auth and an `Origin` header naming the host it
talks to (Artemis' Jolokia refuses requests whose Origin it does not allow). `collect_once`
lists the broker's queues (a search for the queue MBeans), browses each queue asked for and
every dead-letter queue with the queue MBean's `browse()`, which copies messages out without
consuming or locking them, and writes `jms_queue_snapshots` files as the Classic collector does.

What Artemis' browse gives and Classic's could not: the address a queue belongs to, the original
address and queue of a dead-lettered message (`_AMQ_ORIG_ADDRESS`, `_AMQ_ORIG_QUEUE`), the
group id (`_AMQ_GROUP_ID`), typed properties and `redelivered`. It does not give a delivery
count: `delivery_count` stays empty, and `properties` carries `JMSRedelivered` and, for a
dead-lettered message, `poisonwatch_max_delivery_attempts` (the original address's setting,
read from the broker). A dead-letter queue is a queue on an address that some address names as
its `dead-letter-address`.

Each round also lands `jms_address_settings`: per browsed queue, the settings of its address
as the broker resolved its `address-setting` matches (`getAddressSettingsAsJSON`), the policy
models' source for max-delivery-attempts and the redelivery delays where no seed row overrides.
"""

from __future__ import annotations

import base64
import fnmatch
import http.client
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from poisonwatch.broker.client import BrokerError, BrokerGoneError, queue_name_problem
from poisonwatch.broker.landing import BODY_ENCODING_PROPERTY, COLUMNS, integer, millis
from poisonwatch.broker.profiles import BrokerTarget

DOMAIN = "org.apache.activemq.artemis"
# Artemis' own queues that hold no application messages.
INTERNAL_PREFIXES = ("$sys.", "activemq.management", "activemq.notifications")
# Message properties that name what `jms_queue_snapshots` has a column for.
GROUP_PROPERTIES = ("_AMQ_GROUP_ID", "JMSXGroupID")
# Artemis' core message types (Message.getType()), as JMS names them.
MESSAGE_TYPES = {0: "message", 2: "object", 3: "text", 4: "bytes", 5: "map", 6: "stream"}
TYPED_PROPERTIES = (
    "StringProperties",
    "BooleanProperties",
    "ByteProperties",
    "ShortProperties",
    "IntProperties",
    "LongProperties",
    "FloatProperties",
    "DoubleProperties",
)
MAX_ATTEMPTS_PROPERTY = "poisonwatch_max_delivery_attempts"
# Messages per browse request; below Artemis' default management-browse-page-size (200).
BROWSE_PAGE = 100


class ArtemisAuthError(BrokerError):
    """Artemis refused the user or password."""


@dataclass(frozen=True)
class ArtemisQueue:
    mbean: str
    address: str
    name: str
    routing_type: str


def parse_object_name(name: str) -> tuple[str, dict[str, str]]:
    """`domain:k=v,k="quoted, value"` → (domain, {k: v}), with JMX quoting undone."""
    domain, _, rest = name.partition(":")
    props: dict[str, str] = {}
    i = 0
    while i < len(rest):
        eq = rest.index("=", i)
        key = rest[i:eq]
        i = eq + 1
        if i < len(rest) and rest[i] == '"':
            out = []
            i += 1
            while rest[i] != '"':
                if rest[i] == "\\":
                    i += 1
                    out.append("\n" if rest[i] == "n" else rest[i])
                else:
                    out.append(rest[i])
                i += 1
            value = "".join(out)
            i += 1
        else:
            end = rest.find(",", i)
            end = len(rest) if end < 0 else end
            value = rest[i:end]
            i = end
        props[key] = value
        if i < len(rest) and rest[i] == ",":
            i += 1
    return domain, props


def quote_value(value: str) -> str:
    """A value quoted as `javax.management.ObjectName.quote` does."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("*", "\\*")
        .replace("?", "\\?")
        .replace("\n", "\\n")
    )
    return f'"{escaped}"'


class JolokiaClient:
    """Jolokia requests to one Artemis broker; every failure is one `BrokerError` line that
    names the endpoint (never the password)."""

    def __init__(self, target: BrokerTarget, timeout: float = 15.0) -> None:
        self.target = target
        self.timeout = timeout
        self.url = target.jolokia_url
        self._origin = self.url[: self.url.index("/", len("https://"))]
        self._context = ssl.create_default_context(cafile=target.ca_file) if target.tls else None
        self._broker: str | None = None

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Origin": self._origin}
        if self.target.user is not None:
            token = f"{self.target.user}:{self.target.password or ''}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(token).decode("ascii")
        return headers

    def request(self, body: dict[str, Any]) -> Any:
        """One Jolokia request; its `value`."""
        req = urllib.request.Request(
            self.url, data=json.dumps(body).encode(), headers=self._headers(), method="POST"
        )
        where = f"Artemis at {self.url}"
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self._context) as r:
                raw = r.read()
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                who = f"user {self.target.user!r}" if self.target.user else "no user"
                raise ArtemisAuthError(
                    f"{where} refused {who} (HTTP {exc.code}): check the user and password"
                ) from None
            raise BrokerError(
                f"{where} answered HTTP {exc.code}: not an Artemis Jolokia endpoint?"
            ) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            why = getattr(exc, "reason", None) or exc
            raise BrokerGoneError(f"cannot reach {where}: {why}") from None
        try:
            answer = json.loads(raw)
        except ValueError:
            raise BrokerError(f"{where} did not answer as Jolokia (not JSON)") from None
        if not isinstance(answer, dict) or "status" not in answer:
            raise BrokerError(f"{where} did not answer as Jolokia (no status)")
        status = answer.get("status")
        if status in (401, 403):
            raise ArtemisAuthError(
                f"{where} refused the request (Jolokia {status}): "
                f"{str(answer.get('error', ''))[:200]}"
            )
        if status != 200:
            raise BrokerError(
                f"{where}: {body.get('operation') or body.get('type')} failed ({status}): "
                f"{str(answer.get('error', ''))[:300]}"
            )
        return answer.get("value")

    def broker_mbean(self) -> str:
        """The broker's MBean name; the broker named in the target when there are several."""
        if self._broker:
            return self._broker
        found = self.request({"type": "search", "mbean": f"{DOMAIN}:broker=*"})
        names = [n for n in found or [] if isinstance(n, str)]
        if not names:
            raise BrokerError(f"{self.url} answers Jolokia but has no ActiveMQ Artemis broker")
        if len(names) > 1:
            wanted = [n for n in names if parse_object_name(n)[1].get("broker") == self.target.name]
            if len(wanted) != 1:
                raise BrokerError(
                    f"{self.url} has {len(names)} Artemis brokers: name one with ?name="
                )
            names = wanted
        self._broker = names[0]
        return self._broker

    def broker_name(self) -> str:
        return parse_object_name(self.broker_mbean())[1]["broker"]

    def queues(self) -> list[ArtemisQueue]:
        broker = self.broker_mbean()
        pattern = (
            f"{broker},component=addresses,address=*,subcomponent=queues,routing-type=*,queue=*"
        )
        out = []
        for mbean in self.request({"type": "search", "mbean": pattern}) or []:
            _, props = parse_object_name(str(mbean))
            out.append(
                ArtemisQueue(
                    mbean=str(mbean),
                    address=props.get("address", ""),
                    name=props.get("queue", ""),
                    routing_type=props.get("routing-type", ""),
                )
            )
        return sorted(out, key=lambda q: (q.address, q.name))

    def exec(self, mbean: str, operation: str, *arguments: Any) -> Any:
        """One MBean operation (`operation` with its Java signature); its result."""
        return self.request(
            {"type": "exec", "mbean": mbean, "operation": operation, "arguments": list(arguments)}
        )

    def read(self, mbean: str, attribute: str) -> Any:
        """One MBean attribute's value."""
        return self.request({"type": "read", "mbean": mbean, "attribute": attribute})

    def address_settings(self, address: str) -> dict[str, Any]:
        value = self.exec(
            self.broker_mbean(), "getAddressSettingsAsJSON(java.lang.String)", address
        )
        try:
            settings = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            return {}
        return settings if isinstance(settings, dict) else {}

    def browse(self, queue: ArtemisQueue, filter: str = "") -> list[dict[str, Any]]:
        """Every message of the queue that `filter` (an Artemis filter; "" is all) selects,
        copied out (the broker keeps them all), page by page: `browse()` alone stops at the
        address's management-browse-page-size. Messages in delivery to a consumer are not
        among them."""
        out: list[dict[str, Any]] = []
        page = 1
        while True:
            value = self.exec(
                queue.mbean, "browse(int,int,java.lang.String)", page, BROWSE_PAGE, filter
            )
            if not isinstance(value, list):
                raise BrokerError(f"{self.url}: browse of {queue.name!r} did not return a list")
            out.extend(m for m in value if isinstance(m, dict))
            if len(value) < BROWSE_PAGE:
                return out
            page += 1


def _properties(msg: dict[str, Any]) -> dict[str, str]:
    """The message's typed properties as text, as the Classic path keeps them."""
    out: dict[str, str] = {}
    for key in TYPED_PROPERTIES:
        table = msg.get(key)
        if isinstance(table, dict):
            for name, value in table.items():
                out[str(name)] = value if isinstance(value, str) else json.dumps(value)
    return out


def _body(msg: dict[str, Any], props: dict[str, str]) -> str | None:
    text = msg.get("text")
    if isinstance(text, str):
        return text
    preview = msg.get("BodyPreview")
    if not isinstance(preview, list):
        return None
    data = bytes(int(b) & 0xFF for b in preview)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        props[BODY_ENCODING_PROPERTY] = "base64"
        return base64.b64encode(data).decode("ascii")


def snapshot_row(
    broker_name: str,
    queue: ArtemisQueue,
    msg: dict[str, Any],
    snapshot_at: str,
    max_attempts: dict[str, int | None],
) -> dict[str, object]:
    """One `jms_queue_snapshots` record for a message of Artemis' browse()."""
    props = _properties(msg)
    body = _body(msg, props)
    if "redelivered" in msg:
        props["JMSRedelivered"] = "true" if msg["redelivered"] else "false"
    orig_address = props.get("_AMQ_ORIG_ADDRESS")
    if orig_address and max_attempts.get(orig_address) is not None:
        props[MAX_ATTEMPTS_PROPERTY] = str(max_attempts[orig_address])
    user_id = str(msg.get("userID") or "")
    # A JMS client's JMSMessageID is "ID:" + the message's user id; a message sent without
    # one (STOMP, management) has only the broker's own id.
    message_id = (user_id if user_id.startswith("ID:") else f"ID:{user_id}") if user_id else ""
    row: dict[str, object] = {
        "snapshot_at": snapshot_at,
        "broker_name": broker_name,
        "address": queue.address,
        "queue_name": queue.name,
        "message_id": message_id or str(msg.get("messageID", "")),
        "enqueued_at": millis(str(msg.get("timestamp", ""))),
        "delivery_count": None,
        "priority": integer(msg.get("priority")),
        "group_id": next((props[p] for p in GROUP_PROPERTIES if props.get(p)), None),
        "orig_address": orig_address,
        "orig_queue": props.get("_AMQ_ORIG_QUEUE"),
        "message_type": props.get("JMSType") or MESSAGE_TYPES.get(integer(msg.get("type")) or 0),
        "body": body,
        "properties": json.dumps(props, ensure_ascii=False, sort_keys=True),
    }
    return {c: row[c] for c in COLUMNS}


def choose_queues(
    queues: list[ArtemisQueue], patterns: list[str], dead_letter_addresses: set[str]
) -> list[ArtemisQueue]:
    """The queues asked for (every application queue when none) plus every dead-letter queue."""

    def internal(q: ArtemisQueue) -> bool:
        return q.address.startswith(INTERNAL_PREFIXES) or q.name.startswith(INTERNAL_PREFIXES)

    def asked(q: ArtemisQueue) -> bool:
        if not patterns:
            return not internal(q)
        return any(fnmatch.fnmatchcase(q.name, p) for p in patterns)

    return [q for q in queues if asked(q) or q.address in dead_letter_addresses]


# What Artemis applies when no address-setting names a value (its manual, "Message
# Redelivery"): ten deliveries, no delay, a multiplier of 1, a cap of ten times the delay.
DEFAULT_MAX_DELIVERY_ATTEMPTS = 10
DEFAULT_REDELIVERY_DELAY_MS = 0
DEFAULT_REDELIVERY_MULTIPLIER = 1.0


@dataclass
class BrowsePlan:
    """The queues one collect round browses and the address settings of their addresses."""

    queues: list[ArtemisQueue]
    settings: dict[str, dict[str, Any]]

    @property
    def max_attempts(self) -> dict[str, int | None]:
        return {a: integer(s.get("maxDeliveryAttempts")) for a, s in self.settings.items()}


def plan_browse(client: JolokiaClient, patterns: list[str], skipped: dict[str, str]) -> BrowsePlan:
    """The queues to browse and their addresses' settings; names that would not name exactly
    one queue are left out (into `skipped`), as the Classic path does."""
    queues = []
    for q in client.queues():
        problem = queue_name_problem(q.name) or (
            queue_name_problem(q.address) if q.address != q.name else None
        )
        if problem:
            skipped[q.name] = problem
        else:
            queues.append(q)
    settings = {a: client.address_settings(a) for a in sorted({q.address for q in queues})}
    dead_letter = {
        str(s["deadLetterAddress"]) for s in settings.values() if s.get("deadLetterAddress")
    }
    return BrowsePlan(choose_queues(queues, patterns, dead_letter), settings)


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number == number and abs(number) != float("inf") else None


def settings_rows(broker_name: str, plan: BrowsePlan, snapshot_at: str) -> list[dict[str, object]]:
    """One `jms_address_settings` record per browsed queue: the settings of its address as
    the broker resolved them, Artemis' own defaults where no address-setting names one."""
    rows: list[dict[str, object]] = []
    for q in plan.queues:
        s = plan.settings.get(q.address, {})
        attempts = integer(s.get("maxDeliveryAttempts"))
        delay = integer(s.get("redeliveryDelay"))
        delay = DEFAULT_REDELIVERY_DELAY_MS if delay is None else delay
        multiplier = _number(s.get("redeliveryMultiplier"))
        cap = integer(s.get("maxRedeliveryDelay"))
        dla = s.get("deadLetterAddress")
        rows.append(
            {
                "snapshot_at": snapshot_at,
                "broker_name": broker_name,
                "address": q.address,
                "queue_name": q.name,
                "max_delivery_attempts": (
                    DEFAULT_MAX_DELIVERY_ATTEMPTS if attempts is None else attempts
                ),
                "redelivery_delay_ms": delay,
                "redelivery_multiplier": (
                    DEFAULT_REDELIVERY_MULTIPLIER if multiplier is None else multiplier
                ),
                "max_redelivery_delay_ms": delay * 10 if cap is None else cap,
                "dead_letter_address": str(dla) if dla else None,
            }
        )
    return rows


def browse_queues(
    client: JolokiaClient, broker_name: str, plan: BrowsePlan, snapshot_at: str
) -> Iterator[tuple[ArtemisQueue, list[dict[str, object]]]]:
    """(queue, its `jms_queue_snapshots` records) for each queue of the plan."""
    max_attempts = plan.max_attempts
    for q in plan.queues:
        messages = client.browse(q)
        missing = (
            {
                p.get("_AMQ_ORIG_ADDRESS")
                for p in ((m.get("StringProperties") or {}) for m in messages)
                if isinstance(p, dict)
            }
            - set(max_attempts)
            - {None}
        )
        for address in sorted(a for a in missing if isinstance(a, str)):
            max_attempts[address] = integer(
                client.address_settings(address).get("maxDeliveryAttempts")
            )
        yield q, [snapshot_row(broker_name, q, m, snapshot_at, max_attempts) for m in messages]
