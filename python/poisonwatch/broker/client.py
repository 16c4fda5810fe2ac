"""A small STOMP client for ActiveMQ Classic (stomp-py underneath): list queues, browse without
consuming, take one message by id, and send + acknowledge inside one broker transaction.

Every wait has a timeout; a broker that goes away raises `BrokerGoneError`, an ERROR frame raises
`BrokerRefusedError` with the broker's own message (both `PoisonwatchError`s, so the CLI prints them
cleanly). Bodies are bytes; headers are the broker's (STOMP 1.2, escapes decoded).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import queue
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from poisonwatch.broker.profiles import BrokerTarget
from poisonwatch.config import PoisonwatchError

# Headers ActiveMQ puts on every MESSAGE frame for JMS header fields; everything else on a frame
# is a message property.
STANDARD_HEADERS = frozenset(
    {
        "content-length",
        "destination",
        "subscription",
        "ack",
        "message-id",
        "correlation-id",
        "expires",
        "redelivered",
        "priority",
        "reply-to",
        "timestamp",
        "type",
        "persistent",
        "original-destination",
        "JMSXUserID",
        "browser",
        "transformation",
    }
)
QUEUE_PREFIX = "/queue/"
ADVISORY_QUEUES = "/topic/ActiveMQ.Advisory.Queue"


class BrokerError(PoisonwatchError):
    """A broker operation failed."""


class BrokerGoneError(BrokerError):
    """The connection to the broker is lost (or could not be made)."""


class BrokerRefusedError(BrokerError):
    """The broker answered with an ERROR frame; the message is the broker's reason."""


@dataclass
class BrokerMessage:
    queue: str
    headers: dict[str, str]
    body: bytes

    @property
    def message_id(self) -> str:
        return self.headers.get("message-id", "")

    @property
    def properties(self) -> dict[str, str]:
        return {k: v for k, v in self.headers.items() if k not in STANDARD_HEADERS}

    @property
    def original_queue(self) -> str | None:
        """The queue a dead-lettered message came from, as the broker names it."""
        dest = self.headers.get("original-destination") or self.headers.get("_AMQ_ORIG_QUEUE")
        if not dest:
            return None
        return dest[len(QUEUE_PREFIX) :] if dest.startswith(QUEUE_PREFIX) else dest


def selector_string(value: str) -> str:
    """A JMS selector string literal: single quotes doubled; control characters refused."""
    if any(ord(ch) < 32 for ch in value):
        raise BrokerError(f"refusing a selector value with control characters: {value!r}")
    return "'" + value.replace("'", "''") + "'"


# ActiveMQ reads these in a destination name as more than one queue (`,` composite, `*` and
# `>` wildcards), as consumer options (`?`) or as another kind of destination (`/`).
_NOT_IN_QUEUE_NAMES = frozenset(",*>?/")


def queue_name_problem(name: str) -> str | None:
    """Why `name` does not name exactly one queue, or None when it does."""
    if not name:
        return "an empty queue name"
    if any(ord(ch) < 32 or 0x7F <= ord(ch) < 0xA0 for ch in name):
        return f"control characters in the queue name {name!r}"
    bad = sorted({ch for ch in name if ch in _NOT_IN_QUEUE_NAMES})
    if bad:
        return f"{' '.join(bad)} in the queue name {name!r} (it would not name exactly one queue)"
    if len(name) > 512:
        return f"a queue name of {len(name)} characters"
    return None


def queue_destination(name: str) -> str:
    """`/queue/<name>` for a name that names exactly one queue; BrokerError otherwise."""
    problem = queue_name_problem(name)
    if problem:
        raise BrokerError(f"not a queue name: {problem}")
    return QUEUE_PREFIX + name


def is_end_of_browse(headers: dict[str, str]) -> bool:
    """ActiveMQ's end-of-browse frame: `browser: end` and `message-id: 0` and none of the JMS
    headers the broker writes on every real message, which a message's properties can add to
    but never take away (a property `browser=end` therefore cannot end a browse)."""
    return (
        headers.get("browser") == "end"
        and headers.get("message-id") == "0"
        and not {"timestamp", "priority", "expires"} & headers.keys()
    )


def tls_context(target: BrokerTarget) -> ssl.SSLContext:
    """Certificate and host name verified, against `ca_file` or the system's trust store."""
    ctx = ssl.create_default_context(cafile=target.ca_file)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


def enable_tls(conn: Any, target: BrokerTarget) -> None:
    """stomp-py builds its own context from these: CERT_REQUIRED with host name checking, the CA
    file or the default certificates."""
    conn.set_ssl(
        for_hosts=[(target.host, target.port)],
        ca_certs=target.ca_file,
        ssl_version=ssl.PROTOCOL_TLS_CLIENT,
        verify=True,
    )


def tls_problem(target: BrokerTarget) -> str | None:
    """Why a TLS handshake with the broker fails (stomp-py only says that it did), or None."""
    try:
        with (
            socket.create_connection((target.host, target.port), timeout=5) as raw,
            tls_context(target).wrap_socket(raw, server_hostname=target.host),
        ):
            return None
    except ssl.SSLCertVerificationError as exc:
        ca = f"the CA file {target.ca_file}" if target.ca_file else "the system's trusted CAs"
        return f"TLS certificate not accepted ({exc.verify_message}; checked against {ca})"
    except (ssl.SSLError, OSError) as exc:
        return f"TLS handshake failed: {exc}"


@dataclass
class _Subscription:
    frames: queue.Queue[Any] = field(default_factory=queue.Queue)


class StompClient:
    """One STOMP 1.2 connection. Use as a context manager."""

    def __init__(self, target: BrokerTarget, timeout: float = 15.0) -> None:
        import stomp

        self.target = target
        self.timeout = timeout
        self._conn = stomp.Connection12(
            [(target.host, target.port)],
            heartbeats=(0, 0),
            auto_decode=False,
            timeout=timeout,
            reconnect_attempts_max=1,
        )
        if target.tls:
            enable_tls(self._conn, target)
        self._subs: dict[str, _Subscription] = {}
        self._receipts: dict[str, threading.Event] = {}
        self._errors: list[str] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._gone = threading.Event()
        self._conn.set_listener("poisonwatch", _Listener(self))

    # --- connection -------------------------------------------------------------------------
    def connect(self) -> StompClient:
        import stomp.exception

        try:
            self._conn.connect(
                self.target.user, self.target.password, wait=True, headers={"host": "localhost"}
            )
        except (stomp.exception.ConnectFailedException, OSError) as exc:
            why = (tls_problem(self.target) if self.target.tls else None) or (
                str(exc) or type(exc).__name__
            )
            raise BrokerGoneError(
                f"cannot connect to broker {self.target.name} at "
                f"{self.target.host}:{self.target.port}: {why}"
            ) from exc
        if not self._conn.is_connected():
            raise BrokerGoneError(
                f"broker {self.target.name} refused the connection: {self._errors}"
            )
        return self

    def close(self) -> None:
        if self._conn.is_connected():
            with contextlib.suppress(Exception):
                self._conn.disconnect()

    def __enter__(self) -> StompClient:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _new_id(self, prefix: str) -> str:
        return f"pw-{prefix}-{next(self._ids)}"

    def _check(self) -> None:
        if self._errors:
            raise BrokerRefusedError(self._errors.pop(0))
        if self._gone.is_set():
            raise BrokerGoneError(f"lost the connection to broker {self.target.name}")

    def _subscribe(self, destination: str, ack: str, headers: dict[str, str]) -> str:
        self._check()
        sub_id = self._new_id("sub")
        self._subs[sub_id] = _Subscription()
        try:
            self._conn.subscribe(destination, id=sub_id, ack=ack, headers=headers)
        except Exception as exc:
            raise BrokerGoneError(
                f"lost the connection to broker {self.target.name}: {exc}"
            ) from exc
        return sub_id

    def _unsubscribe(self, sub_id: str) -> None:
        self._subs.pop(sub_id, None)
        if self._conn.is_connected():
            with contextlib.suppress(Exception):
                self._conn.unsubscribe(sub_id)

    def _next(self, sub_id: str, timeout: float) -> Any:
        """The next frame of a subscription, or None after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        sub = self._subs[sub_id]
        while True:
            self._check()
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                frame = sub.frames.get(timeout=min(left, 0.2))
            except queue.Empty:
                continue
            if frame is None:  # woken by an error or a disconnect
                continue
            return frame

    def _call(self, what: str, fn: Any, *args: Any, **kw: Any) -> None:
        self._check()
        try:
            fn(*args, **kw)
        except Exception as exc:
            raise BrokerGoneError(
                f"lost the connection to broker {self.target.name} during {what}: {exc}"
            ) from exc

    def _wait_receipt(self, receipt: str, what: str) -> None:
        event = self._receipts[receipt]
        deadline = time.monotonic() + self.timeout
        while not event.wait(0.2):
            self._check()
            if time.monotonic() > deadline:
                raise BrokerGoneError(f"no receipt from broker {self.target.name} for {what}")
        self._receipts.pop(receipt, None)
        self._check()

    def sync(self, what: str = "a request") -> None:
        """Wait until the broker has processed every frame sent so far (a receipt round trip)."""
        receipt = self._new_id("rcpt")
        self._receipts[receipt] = threading.Event()
        # A receipt-only DISCONNECT would close the connection: use an empty BEGIN/ABORT pair.
        tx = self._new_id("sync")
        self._call(what, self._conn.begin, tx)
        self._call(what, self._conn.abort, tx, headers={"receipt": receipt})
        self._wait_receipt(receipt, what)

    # --- reading ----------------------------------------------------------------------------
    def list_queues(self, first_wait: float = 10.0, idle: float = 1.0) -> list[str] | None:
        """Queue names from the advisory topic (the broker replays one advisory per existing
        queue to a new subscriber). None when the broker sends nothing (advisories off, or no
        JSON transformation on the broker's class path). The first advisory can take seconds
        (the broker loads its JSON marshaller); the rest follow at once."""
        sub = self._subscribe(ADVISORY_QUEUES, "auto", {"transformation": "jms-advisory-json"})
        names: dict[str, bool] = {}
        got_any = False
        try:
            while True:
                frame = self._next(sub, idle if got_any else first_wait)
                if frame is None:
                    break
                got_any = True
                try:
                    info = json.loads(frame.body.decode("utf-8"))["DestinationInfo"]
                    name = info["destination"]["string"]
                    removed = int(info.get("operationType", 0)) == 1
                except (ValueError, KeyError, TypeError):
                    continue
                names[name] = not removed
        finally:
            self._unsubscribe(sub)
        if not got_any:
            return None
        return sorted(n for n, live in names.items() if live)

    def browse(self, queue_name: str, selector: str | None = None) -> Iterator[BrokerMessage]:
        """Every message of a queue, without consuming it (`browser: true`)."""
        headers = {"browser": "true"}
        if selector:
            headers["selector"] = selector
        sub = self._subscribe(queue_destination(queue_name), "auto", headers)
        try:
            while True:
                frame = self._next(sub, self.timeout)
                if frame is None:
                    raise BrokerGoneError(
                        f"broker {self.target.name} stopped answering while browsing "
                        f"{queue_name} (no end-of-browse within {self.timeout:.0f} s)"
                    )
                if is_end_of_browse(frame.headers):
                    return
                yield BrokerMessage(queue_name, dict(frame.headers), bytes(frame.body or b""))
        finally:
            self._unsubscribe(sub)

    def find(self, queue_name: str, selector: str) -> list[BrokerMessage]:
        return list(self.browse(queue_name, selector))

    # --- acting -----------------------------------------------------------------------------
    def take(self, queue_name: str, selector: str, wait: float = 5.0) -> tuple[str, Any] | None:
        """Subscribe with client-individual acknowledgement and a selector; return
        (subscription id, frame) of the first message, or None when none comes in `wait` s.
        The caller acknowledges it (in a transaction) and calls `release(sub)`."""
        sub = self._subscribe(
            queue_destination(queue_name),
            "client-individual",
            {"selector": selector, "activemq.prefetchSize": "1"},
        )
        frame = self._next(sub, wait)
        if frame is None:
            self._unsubscribe(sub)
            return None
        return sub, frame

    def take_first(
        self, queue_name: str, selector: str, fits: Any, prefetch: int, wait: float = 5.0
    ) -> tuple[str, Any] | None:
        """Like `take`, with up to `prefetch` messages in flight: the first frame for which
        `fits(frame)` is true, or None. The frames passed over stay unacknowledged and go back
        to the queue when the caller releases the subscription."""
        sub = self._subscribe(
            queue_destination(queue_name),
            "client-individual",
            {"selector": selector, "activemq.prefetchSize": str(prefetch)},
        )
        for _ in range(prefetch):
            frame = self._next(sub, wait)
            if frame is None:
                break
            if fits(frame):
                return sub, frame
        self._unsubscribe(sub)
        return None

    def release(self, sub_id: str) -> None:
        self._unsubscribe(sub_id)

    def begin(self) -> str:
        tx = self._new_id("tx")
        self._call("BEGIN", self._conn.begin, tx)
        return tx

    def send(
        self, queue_name: str, body: bytes, headers: dict[str, str], tx: str | None = None
    ) -> None:
        h = dict(headers)
        if tx:
            h["transaction"] = tx
        self._call("SEND", self._conn.send, queue_destination(queue_name), body, headers=h)

    def ack(self, frame: Any, tx: str | None = None) -> None:
        self._call("ACK", self._conn.ack, frame.headers["ack"], transaction=tx)

    def commit(self, tx: str) -> None:
        """COMMIT and wait for the broker's receipt: when this returns, the transaction is
        durable on the broker."""
        receipt = self._new_id("rcpt")
        self._receipts[receipt] = threading.Event()
        self._call("COMMIT", self._conn.commit, tx, headers={"receipt": receipt})
        self._wait_receipt(receipt, f"COMMIT {tx}")

    def abort(self, tx: str) -> None:
        if self._conn.is_connected():
            with contextlib.suppress(Exception):
                self._conn.abort(tx)


NO_LISTING = (
    "ActiveMQ Classic lists its queues to STOMP clients only as JSON advisory messages "
    "(`transformation: jms-advisory-json`), which needs xstream and jettison on the broker's "
    "class path (Debian's activemq package does not put them there; advisorySupport must be on)"
)


def list_queues_apart(target: BrokerTarget, timeout: float = 15.0) -> list[str]:
    """The broker's queues, asked for on a connection of its own: a broker without the JSON
    marshaller drops the connection that asks, and that must not be the one that browses.
    BrokerError (saying what the broker lacks) when it cannot list them."""
    try:
        with StompClient(target, timeout=timeout) as probe:
            names = probe.list_queues()
    except BrokerRefusedError as exc:
        raise BrokerError(
            f"broker {target.name} refused to list its queues ({exc}): {NO_LISTING}"
        ) from exc
    except BrokerGoneError as exc:
        if str(exc).startswith("cannot connect"):
            raise
        raise BrokerError(
            f"broker {target.name} dropped the connection that asked for its queue list: "
            f"{NO_LISTING}"
        ) from exc
    if names is None:
        raise BrokerError(f"broker {target.name} sent no queue list: {NO_LISTING}")
    return names


class _Listener:
    """stomp-py listener: frames into per-subscription queues, errors and disconnects wake
    every waiter."""

    def __init__(self, client: StompClient) -> None:
        self.client = client

    def _wake(self) -> None:
        for sub in list(self.client._subs.values()):
            sub.frames.put(None)

    def on_message(self, frame: Any) -> None:
        sub = self.client._subs.get(frame.headers.get("subscription", ""))
        if sub is not None:
            sub.frames.put(frame)

    def on_receipt(self, frame: Any) -> None:
        event = self.client._receipts.get(frame.headers.get("receipt-id", ""))
        if event is not None:
            event.set()

    def on_error(self, frame: Any) -> None:
        body = frame.body.decode("utf-8", "replace") if frame.body else ""
        text = frame.headers.get("message", "") + (f": {body.strip()}" if body.strip() else "")
        self.client._errors.append(text[:2000] or "ERROR frame without a message")
        self._wake()

    def on_disconnected(self) -> None:
        self.client._gone.set()
        self._wake()

    def on_connection_lost(self) -> None:
        self.on_disconnected()

    def __getattr__(self, name: str) -> Any:  # the other stomp-py callbacks: ignore
        if name.startswith("on_"):
            return lambda *a, **k: None
        raise AttributeError(name)
