"""Attempt logging for Python STOMP consumers (seed 004: record the failure *outside* the
transaction that read the message, right after it ended).

```python
from poisonwatch.broker.kit import AttemptRecorder, TemporarilyUnavailable

recorder = AttemptRecorder("/data/landing", broker_name="orders-broker",
                           consumer_id="agent.orders")

def on_message(frame):                       # your stomp-py listener
    with recorder.attempt(frame):            # the record is written when this block ends
        try:
            handle(frame)                    # raise TemporarilyUnavailable for a detectable
            conn.ack(frame.headers["ack"])   # transient failure (document not replicated yet)
        except Exception:
            conn.nack(frame.headers["ack"])  # the broker redelivers, then dead-letters
            raise                            # propagates unchanged through attempt()
```

Every delivery becomes one `jms_receive_attempts` record: outcome `acknowledged` (the block
ended normally), `temporarily_unavailable` (it raised `TemporarilyUnavailable`, or a class
given in `transient=`) or `rolled_back` (any other exception), with the exception's class
(`module.QualName`) and message, the stack trace, the delivery count, the redelivered flag,
consumer id, server name and activation id. The exception is re-raised exactly as it was
(`attempt()` never swallows or replaces it); a failure to write the log is reported on stderr
and never reaches the consumer.

Records go to `<landing>/jms_receive_attempts/` in JSON-lines files that appear complete (a
hidden `.tmp` file renamed every `rotate_records` records / `rotate_seconds` seconds and at
`close()`), so `poisonwatch ingest` never reads half a file. The writer holds an advisory lock
on its `.tmp` file; a recorder that starts renames every unlocked `.tmp` file (its writer died:
kill -9, a crash) to its complete name, cut after its last whole record, so buffered records are
recovered, not lost (`recovered` lists them).

Delivery count: ActiveMQ Classic's STOMP frames carry `redelivered` but not the count, so the
recorder counts the deliveries it saw of each message id in this process (a redelivered
message seen for the first time counts 2); a `JMSXDeliveryCount` property, when present, wins.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import re
import socket
import sys
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

DATASET = "jms_receive_attempts"
COLUMNS = (
    "attempted_at",
    "broker_name",
    "address",
    "queue_name",
    "message_id",
    "correlation_id",
    "group_id",
    "delivery_count",
    "redelivered",
    "orig_address",
    "orig_queue",
    "message_type",
    "consumer_id",
    "server_name",
    "activation_id",
    "outcome",
    "exception_class",
    "exception_message",
    "stack_trace",
)
MAX_TEXT = 4000
try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so no telling a dead writer's buffer
    fcntl = None  # type: ignore[assignment]
_TMP_NAME = re.compile(r"\.(?P<name>[^/]+\.jsonl)\.tmp\Z")


class TemporarilyUnavailable(Exception):  # noqa: N818 (seed 002's name)
    """A detectable transient failure (seed 002's TemporaryUnavailableException): roll back and
    let the broker deliver the message again later; circuit breakers do not count it."""


def _iso(ts: dt.datetime) -> str:
    return ts.strftime("%Y-%m-%dT%H:%M:%S.%f") + "Z"


def _queue_of(destination: str) -> str:
    return destination.split("/queue/", 1)[1] if destination.startswith("/queue/") else destination


def exception_name(exc: BaseException) -> str:
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


class AttemptRecorder:
    """Writes one `jms_receive_attempts` record per delivery attempt (thread-safe)."""

    def __init__(
        self,
        landing: str | os.PathLike[str],
        broker_name: str,
        consumer_id: str,
        server_name: str | None = None,
        activation_id: str | None = None,
        transient: tuple[type[BaseException], ...] = (),
        rotate_records: int = 500,
        rotate_seconds: float = 30.0,
    ) -> None:
        self.folder = Path(landing) / DATASET
        self.folder.mkdir(parents=True, exist_ok=True)
        self.broker_name = broker_name
        self.consumer_id = consumer_id
        self.server_name = server_name or socket.gethostname()
        self.activation_id = activation_id or uuid.uuid4().hex
        self.transient = (TemporarilyUnavailable, *transient)
        self.rotate_records = rotate_records
        self.rotate_seconds = rotate_seconds
        self._lock = threading.Lock()
        self._seen: dict[str, int] = {}
        self._fh: Any = None
        self._path: Path | None = None
        self._records = 0
        self._opened = 0.0
        self._seq = 0
        self.files: list[Path] = []
        self.written = 0
        self.recovered: list[Path] = recover_buffers(self.folder)

    # --- the public API ---------------------------------------------------------------------
    @contextlib.contextmanager
    def attempt(self, frame: Any, queue_name: str | None = None) -> Iterator[None]:
        """Record the delivery `frame` (a stomp-py Frame, or anything with `.headers`) when
        the block ends; exceptions propagate unchanged."""
        try:
            yield
        except BaseException as exc:
            outcome = (
                "temporarily_unavailable" if isinstance(exc, self.transient) else "rolled_back"
            )
            self._safe_record(frame, queue_name, outcome, exc)
            raise
        else:
            self._safe_record(frame, queue_name, "acknowledged", None)

    def wrap(self, handler: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """Decorator form: `recorder.wrap(handler)(frame)` records each call's outcome."""

        def wrapped(frame: Any) -> Any:
            with self.attempt(frame):
                return handler(frame)

        wrapped.__name__ = getattr(handler, "__name__", "handler")
        wrapped.__doc__ = handler.__doc__
        return wrapped

    def close(self) -> None:
        with self._lock:
            self._rotate()

    def __enter__(self) -> AttemptRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- internals --------------------------------------------------------------------------
    def _safe_record(
        self, frame: Any, queue_name: str | None, outcome: str, exc: BaseException | None
    ) -> None:
        try:
            self.record(self.row(frame, queue_name, outcome, exc))
        except Exception as log_exc:  # the consumer must never see the logger's failure
            print(f"poisonwatch kit: could not record an attempt: {log_exc!r}", file=sys.stderr)

    def row(
        self, frame: Any, queue_name: str | None, outcome: str, exc: BaseException | None
    ) -> dict[str, Any]:
        h = dict(frame.headers)
        message_id = h.get("message-id", "")
        redelivered = str(h.get("redelivered", "false")).lower() == "true"
        with self._lock:
            seen = self._seen.get(message_id, 1 if redelivered else 0) + 1
            self._seen[message_id] = seen
        try:
            delivery_count = int(h["JMSXDeliveryCount"])
        except (KeyError, ValueError):
            delivery_count = seen
        queue = queue_name or _queue_of(h.get("destination", ""))
        orig = h.get("original-destination") or h.get("_AMQ_ORIG_QUEUE")
        orig_queue = _queue_of(orig) if orig else None
        row = {
            "attempted_at": _iso(dt.datetime.now(dt.UTC).replace(tzinfo=None)),
            "broker_name": self.broker_name,
            "address": queue,
            "queue_name": queue,
            "message_id": message_id,
            "correlation_id": h.get("correlation-id"),
            "group_id": h.get("JMSXGroupID"),
            "delivery_count": delivery_count,
            "redelivered": redelivered,
            "orig_address": h.get("_AMQ_ORIG_ADDRESS") or orig_queue,
            "orig_queue": orig_queue,
            "message_type": h.get("type"),
            "consumer_id": self.consumer_id,
            "server_name": self.server_name,
            "activation_id": self.activation_id,
            "outcome": outcome,
            "exception_class": exception_name(exc) if exc is not None else None,
            "exception_message": str(exc)[:MAX_TEXT] if exc is not None else None,
            "stack_trace": (
                "".join(traceback.format_exception(exc))[-MAX_TEXT:] if exc is not None else None
            ),
        }
        return row

    def record(self, row: dict[str, Any]) -> None:
        line = json.dumps({c: row.get(c) for c in COLUMNS}, ensure_ascii=False) + "\n"
        with self._lock:
            if self._fh is None:
                self._open()
            self._fh.write(line)
            self._fh.flush()
            self._records += 1
            self.written += 1
            if (
                self._records >= self.rotate_records
                or time.monotonic() - self._opened >= self.rotate_seconds
            ):
                self._rotate()

    def _open(self) -> None:
        self._seq += 1
        stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
        safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in self.consumer_id)
        name = f"{safe[:60]}-{os.getpid()}-{self.activation_id[:12]}-{stamp}-{self._seq}.jsonl"
        self._path = self.folder / name
        self._fh = (self.folder / f".{name}.tmp").open("w", encoding="utf-8")
        if fcntl is not None:
            fcntl.flock(self._fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        self._records = 0
        self._opened = time.monotonic()

    def _rotate(self) -> None:
        if self._fh is None or self._path is None:
            return
        tmp = Path(self._fh.name)
        self._fh.flush()
        os.fsync(self._fh.fileno())
        # Renamed while still locked, so a starting recorder never takes it for a dead one's.
        if self._records:
            os.replace(tmp, self._path)
            self.files.append(self._path)
        else:
            tmp.unlink(missing_ok=True)
        self._fh.close()
        self._fh = None


def recover_buffers(folder: Path) -> list[Path]:
    """Rename the `.tmp` buffers of dead writers to their complete names (cut after the last
    whole record; an empty one is removed); returns the files recovered. Without `fcntl`
    (Windows) nothing is recovered: a live writer could not be told from a dead one."""
    out: list[Path] = []
    if fcntl is None:
        return out
    for tmp in sorted(folder.glob(".*.jsonl.tmp")):
        match = _TMP_NAME.match(tmp.name)
        if not match:
            continue
        try:
            fh = tmp.open("r+b")
        except FileNotFoundError:
            continue  # another recorder took it
        with fh:
            try:
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is alive
            try:
                if os.stat(tmp).st_ino != os.fstat(fh.fileno()).st_ino:
                    continue  # renamed by another recorder before we locked it
            except FileNotFoundError:
                continue
            data = fh.read()
            cut = data.rfind(b"\n") + 1
            if cut < len(data):
                fh.truncate(cut)
            fh.flush()
            os.fsync(fh.fileno())
            if cut == 0:
                tmp.unlink(missing_ok=True)
                continue
            final = folder / match["name"]
            if final.exists():
                final = folder / (match["name"][: -len(".jsonl")] + "-recovered.jsonl")
            os.replace(tmp, final)
            out.append(final)
    return out


def consume(
    target: Any,
    queue_name: str,
    handler: Callable[[Any], Any],
    recorder: AttemptRecorder,
    stop: threading.Event,
    prefetch: int = 1,
) -> None:
    """A ready-made consumer loop until `stop` is set: subscribe with client-individual
    acknowledgement, call `handler(frame)` per delivery, ACK on success, NACK on an exception
    (ActiveMQ's redelivery policy then redelivers or dead-letters), record every attempt.
    `target` is a `poisonwatch.broker.profiles.BrokerTarget`."""
    import stomp

    conn = stomp.Connection12([(target.host, target.port)], heartbeats=(0, 0), auto_decode=False)
    if getattr(target, "tls", False):
        from poisonwatch.broker.client import enable_tls

        enable_tls(conn, target)

    class _Listener(stomp.ConnectionListener):  # type: ignore[misc]
        def on_message(self, frame: Any) -> None:
            ack_id = frame.headers["ack"]
            with contextlib.suppress(Exception), recorder.attempt(frame, queue_name):
                try:
                    handler(frame)
                except BaseException:
                    conn.nack(ack_id)
                    raise
                conn.ack(ack_id)

    conn.set_listener("poisonwatch-kit", _Listener())
    conn.connect(target.user, target.password, wait=True)
    conn.subscribe(
        f"/queue/{queue_name}",
        id=f"kit-{recorder.consumer_id}",
        ack="client-individual",
        headers={"activemq.prefetchSize": str(prefetch)},
    )
    try:
        while not stop.wait(0.2):
            if not conn.is_connected():
                break
    finally:
        with contextlib.suppress(Exception):
            conn.disconnect()
        recorder.close()
