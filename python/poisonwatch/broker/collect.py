"""`poisonwatch collect`: browse a live ActiveMQ Classic broker's queues (dead-letter queues
included) into `jms_queue_snapshots` landing files, without consuming anything; an Artemis
broker (`kind == "artemis"`) is browsed through its management API (broker/artemis.py), which
also gives the delivery settings it applies to each queue (`jms_address_settings`).

One file per queue and round, written to a temporary name and renamed when the queue's browse
ended: a broker that goes away mid-run stops the run with a clear error, and every file already
there is complete (the half-browsed queue leaves no file).

Exact queue names (`--queues a,b`) are browsed without asking the broker for its queue list;
patterns and "every queue" need the list, asked for on a connection of its own (a stock
ActiveMQ Classic drops the connection that asks, see `client.list_queues_apart`).
"""

from __future__ import annotations

import base64
import datetime as dt
import fnmatch
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from poisonwatch.broker.artemis import JolokiaClient, browse_queues, plan_browse, settings_rows
from poisonwatch.broker.client import (
    NO_LISTING,
    BrokerError,
    BrokerGoneError,
    BrokerMessage,
    StompClient,
    list_queues_apart,
    queue_name_problem,
)
from poisonwatch.broker.landing import (
    BODY_ENCODING_PROPERTY,
    COLUMNS,
    DATASET,
    SETTINGS_DATASET,
    integer,
    iso,
    millis,
)
from poisonwatch.broker.profiles import BrokerTarget
from poisonwatch.config import PoisonwatchError, home
from poisonwatch.textsafe import terminal


@dataclass
class CollectResult:
    broker_name: str
    rounds: int = 0
    files: list[Path] = field(default_factory=list)
    messages: int = 0
    per_queue: dict[str, int] = field(default_factory=dict)
    listed: bool = False
    error: str | None = None
    # Listed or named queues not browsed: their names do not name exactly one queue.
    skipped: dict[str, str] = field(default_factory=dict)
    # `jms_address_settings` records written (Artemis: one per browsed queue and round).
    settings: int = 0


def snapshot_row(target: BrokerTarget, msg: BrokerMessage, snapshot_at: str) -> dict[str, object]:
    """One `jms_queue_snapshots` record for a browsed message."""
    props = msg.properties
    try:
        body = msg.body.decode("utf-8")
    except UnicodeDecodeError:
        body = base64.b64encode(msg.body).decode("ascii")
        props[BODY_ENCODING_PROPERTY] = "base64"
    orig_queue = msg.original_queue
    orig_address = props.get("_AMQ_ORIG_ADDRESS") or orig_queue
    row: dict[str, object] = {
        "snapshot_at": snapshot_at,
        "broker_name": target.name,
        # ActiveMQ Classic has no address/queue split: the address is the queue.
        "address": msg.queue,
        "queue_name": msg.queue,
        "message_id": msg.message_id,
        "enqueued_at": millis(msg.headers.get("timestamp")),
        "delivery_count": integer(props.get("JMSXDeliveryCount")),
        "priority": integer(msg.headers.get("priority")),
        "group_id": props.get("JMSXGroupID"),
        "orig_address": orig_address,
        "orig_queue": orig_queue,
        "message_type": msg.headers.get("type"),
        "body": body,
        "properties": json.dumps(props, ensure_ascii=False, sort_keys=True),
    }
    return {c: row[c] for c in COLUMNS}


def _safe_file_part(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text)[:80] or "_"


def needs_listing(patterns: list[str]) -> bool:
    """Whether these --queues need the broker's queue list (patterns, or none: every queue)."""
    return not patterns or any(any(ch in p for ch in "*?[") for p in patterns)


def choose_queues(target: BrokerTarget, patterns: list[str], listed: list[str] | None) -> list[str]:
    """Queues to browse: the names/patterns asked for (all queues when none) plus every
    dead-letter queue; without a listing, only exact names (and their DLQs)."""
    if listed is None:
        if needs_listing(patterns):
            raise PoisonwatchError(
                f"broker {target.name} does not list its queues: {NO_LISTING}. Name the "
                "queues exactly with --queues (comma-separated; their dead-letter queues are "
                "browsed too)"
            )
        names = list(patterns) + [target.dlq_for(p) for p in patterns]
        return sorted(set(names) | {target.shared_dlq})
    if patterns:
        chosen = {q for q in listed if any(fnmatch.fnmatchcase(q, p) for p in patterns)}
    else:
        chosen = {q for q in listed if not q.startswith("ActiveMQ.Advisory.")}
    chosen |= {q for q in listed if target.is_dlq(q)}
    return sorted(chosen)


def collect_once(
    client: StompClient,
    target: BrokerTarget,
    patterns: list[str],
    out: Path,
    result: CollectResult,
) -> None:
    """One round: list (when patterns need it), browse, write one file per non-empty queue."""
    folder = out / DATASET
    folder.mkdir(parents=True, exist_ok=True)
    listed: list[str] | None = None
    if needs_listing(patterns):
        try:
            listed = list_queues_apart(target, timeout=client.timeout)
        except BrokerGoneError:
            raise
        except BrokerError as exc:
            raise BrokerError(
                f"{exc}. Name the queues exactly with --queues (comma-separated; their "
                "dead-letter queues are browsed too)"
            ) from exc
    result.listed = listed is not None
    if listed is not None:
        for name in listed:
            problem = queue_name_problem(name)
            if problem:
                result.skipped[name] = problem
        listed = [n for n in listed if n not in result.skipped]
    now = dt.datetime.now(dt.UTC)
    snapshot_at = iso(now)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    for queue_name in choose_queues(target, patterns, listed):
        rows = (snapshot_row(target, msg, snapshot_at) for msg in client.browse(queue_name))
        write_queue_file(folder, target.name, stamp, queue_name, rows, result)
    result.rounds += 1


def write_queue_file(
    folder: Path,
    broker_name: str,
    stamp: str,
    queue_name: str,
    rows: Iterable[dict[str, object]],
    result: CollectResult,
) -> None:
    """One queue's records under a temporary name, renamed when complete (no file when empty):
    a browse that fails half-way leaves nothing behind."""
    final = folder / f"{_safe_file_part(broker_name)}-{stamp}-{_safe_file_part(queue_name)}.jsonl"
    n = write_records(final, rows, result)
    result.messages += n
    result.per_queue[queue_name] = result.per_queue.get(queue_name, 0) + n


def write_records(final: Path, rows: Iterable[dict[str, object]], result: CollectResult) -> int:
    """JSON lines under a hidden temporary name, renamed to `final` when complete (no file
    when there is no record); how many were written."""
    tmp = final.with_name("." + final.name + ".tmp")
    n = 0
    try:
        with tmp.open("w", encoding="utf-8") as fh:
            for row in rows:
                fh.write(json.dumps(row) + "\n")
                n += 1
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if n:
        os.replace(tmp, final)
        result.files.append(final)
    else:
        tmp.unlink()
    return n


def collect_artemis_once(
    client: JolokiaClient, patterns: list[str], out: Path, result: CollectResult
) -> None:
    """One round against Artemis: the same files, through its management API, and one
    `jms_address_settings` file with the delivery settings the broker applies to each queue."""
    folder = out / DATASET
    folder.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)
    stamp = now.strftime("%Y%m%dT%H%M%S%fZ")
    result.listed = True
    plan = plan_browse(client, patterns, result.skipped)
    for queue, rows in browse_queues(client, result.broker_name, plan, iso(now)):
        write_queue_file(folder, result.broker_name, stamp, queue.name, rows, result)
    # Written after the browse: a round the broker cut short leaves no settings file.
    settings = out / SETTINGS_DATASET
    settings.mkdir(parents=True, exist_ok=True)
    final = settings / f"{_safe_file_part(result.broker_name)}-{stamp}.jsonl"
    result.settings += write_records(
        final, settings_rows(result.broker_name, plan, iso(now)), result
    )
    result.rounds += 1


def collect(
    target: BrokerTarget,
    patterns: list[str],
    out: Path | None = None,
    every: float | None = None,
    count: int = 1,
    console: Console | None = None,
) -> CollectResult:
    """Browse the broker `count` times, `every` seconds apart. A lost broker ends the run with
    `result.error` set (files of finished queues stay); the caller decides the exit code."""
    console = console or Console(stderr=True)
    out = out or home() / "landing"
    result = CollectResult(broker_name=target.name)
    if target.kind == "artemis":
        return _collect_artemis(target, patterns, out, every, count, console, result)
    client = StompClient(target)
    try:
        client.connect()
        _rounds(lambda: collect_once(client, target, patterns, out, result), count, every)
    except BrokerError as exc:
        result.error = str(exc)
        console.print(f"[red]collect stopped:[/red] {terminal(str(exc))}")
    finally:
        client.close()
    return result


def _rounds(once: Callable[[], None], count: int, every: float | None) -> None:
    """`once()` `count` times (at least once), each starting `every` seconds after the last."""
    for i in range(max(count, 1)):
        started = time.monotonic()
        once()
        if i + 1 < count and every:
            time.sleep(max(0.0, every - (time.monotonic() - started)))


def _collect_artemis(
    target: BrokerTarget,
    patterns: list[str],
    out: Path,
    every: float | None,
    count: int,
    console: Console,
    result: CollectResult,
) -> CollectResult:
    client = JolokiaClient(target)
    try:
        if not target.named:
            result.broker_name = client.broker_name()
        _rounds(lambda: collect_artemis_once(client, patterns, out, result), count, every)
    except BrokerError as exc:
        result.error = str(exc)
        # One line however long the URL: the terminal may wrap it, rich does not break it.
        console.print(f"[red]collect stopped:[/red] {terminal(str(exc))}", soft_wrap=True)
    return result


def print_result(result: CollectResult, console: Console | None = None) -> None:
    console = console or Console()
    console.print(
        f"broker {terminal(result.broker_name)}: {result.rounds} round(s), "
        f"{result.messages} message(s) in {len(result.files)} file(s)"
        + ("" if result.listed else " (the queues named, without the broker's queue list)")
    )
    for queue_name, n in sorted(result.per_queue.items()):
        console.print(f"  {terminal(queue_name)}: {n}")
    if result.settings:
        console.print(f"  delivery settings (jms_address_settings): {result.settings} record(s)")
    for problem in sorted(result.skipped.values()):
        console.print(f"  [yellow]not browsed:[/yellow] {terminal(problem)}")
