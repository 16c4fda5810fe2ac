"""STOMP frames built only from validated parts, on one real ActiveMQ Classic broker (xstream and
jettison on its class path, `m.*` queues dead-lettering to the shared ActiveMQ.DLQ): hostile
property names cannot move a message elsewhere, action destinations name exactly one queue,
parked messages go back only where the ledger says, a message cannot end a browse, retry picks
the DLQ copy of the right queue, and the kit recovers a killed consumer's buffered records.
New names (ParkRecord, ...) are imported inside the tests, so each test fails on its own on
the code before these fixes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.activemq import ActiveMQ, broker_fixture, client_fixture, ensure_activemq

from poisonwatch.broker.actions import ACTION_PROPERTY, JOURNAL_QUEUE, LiveAction, execute
from poisonwatch.broker.client import StompClient
from poisonwatch.broker.collect import collect
from poisonwatch.broker.kit import AttemptRecorder, consume
from poisonwatch.broker.profiles import parse_broker_url

_why = ensure_activemq()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


broker = broker_fixture(max_redeliveries=1, shared_dlq_queues=("m.>",))
client = client_fixture()


def _raw_send(client: StompClient, destination: str, body: bytes, **headers: str) -> None:
    """A SEND as any STOMP producer may make it (stomp-py writes header names unescaped)."""
    client._conn.send(destination, body, headers={"persistent": "true", **headers})
    client.sync()


def _bodies(client: StompClient, queue: str) -> list[bytes]:
    return [m.body for m in client.browse(queue)]


def test_a_property_name_with_a_line_break_cannot_move_the_message(
    broker: ActiveMQ, client: StompClient
) -> None:
    target = parse_broker_url(broker.url)
    # ActiveMQ decodes `\n` in a STOMP 1.2 header name, so the property's name holds a line
    # break; stomp-py writes header names unescaped and sorted, and ActiveMQ keeps the first of
    # two `destination:` lines: copied as it is, this name would send the message to h.stolen.
    injected = "a\ndestination"
    _raw_send(
        client,
        "/queue/h.inj",
        b"hostile",
        **{
            "a\\ndestination": "/queue/h.stolen",
            "ok_name": "kept",
            "bad-name": "x",
            "poisonwatch_forged": "x",
            "poisonwatch_park_queue": "h.stolen",
        },
    )
    (msg,) = list(client.browse("h.inj"))
    assert msg.properties[injected] == "/queue/h.stolen"
    out = execute(
        client, target, LiveAction("act-inj", "dead_letter", target.name, "h.inj", msg.message_id)
    )
    assert out.status == "applied", out.detail
    assert _bodies(client, "h.stolen") == []
    (moved,) = list(client.browse("DLQ.h.inj"))
    assert moved.body == b"hostile" and moved.properties["ok_name"] == "kept"
    assert not {"bad-name", "poisonwatch_forged", "poisonwatch_park_queue"} & set(moved.properties)
    assert not [k for k in moved.properties if "\n" in k]
    assert json.loads(moved.properties["poisonwatch_dropped_properties"]) == sorted(
        ["bad-name", injected, "poisonwatch_forged"]
    )
    assert moved.original_queue == "h.inj"
    client.sync()  # the connection is still fine


def test_action_destinations_name_exactly_one_queue(broker: ActiveMQ, client: StompClient) -> None:
    target = parse_broker_url(broker.url)
    _raw_send(client, "/queue/v.src", b"stay")
    (msg,) = list(client.browse("v.src"))
    mid = msg.message_id
    bad = [
        LiveAction("act-v1", "dead_letter", target.name, "v.src,v.other", mid),
        LiveAction("act-v2", "discard", target.name, "v.*", mid),
        LiveAction("act-v3", "discard", target.name, "v.>", mid),
        LiveAction("act-v4", "park", target.name, "/topic/v.src", mid),
        LiveAction("act-v5", "discard", target.name, "v.src\ndestination:/queue/x", mid),
        LiveAction("act-v6", "discard", target.name, JOURNAL_QUEUE, mid),
        LiveAction("act-v7", "retry_from_dlq", target.name, "v.src", mid, orig_queue="a,b"),
        LiveAction("act-v8", "retry_from_dlq", target.name, "v.src", mid, orig_queue=JOURNAL_QUEUE),
        LiveAction("act-v9", "dead_letter", target.name, "v.src", "ID:x\ny"),
    ]
    for action in bad:
        out = execute(client, target, action)
        assert out.status == "failed" and out.detail.startswith("refused"), (action, out)
    assert _bodies(client, "v.src") == [b"stay"]  # nothing moved, the connection still works
    markers = {m.properties.get(ACTION_PROPERTY) for m in client.browse(JOURNAL_QUEUE)}
    assert not {a.action_id for a in bad} & markers


def test_parked_messages_go_back_only_where_the_ledger_says(
    broker: ActiveMQ, client: StompClient
) -> None:
    from poisonwatch.broker.actions import ParkRecord
    from poisonwatch.broker.live import LiveRunner

    target = parse_broker_url(broker.url)
    _raw_send(client, "/queue/p.src", b"parked by poisonwatch")
    (msg,) = list(client.browse("p.src"))
    park = LiveAction(
        "act-park", "park", target.name, "p.src", msg.message_id, park_delay_minutes=0
    )
    assert execute(client, target, park).target_queue == "p.src.parked"
    # Put straight into the holding queue: one names another queue in its own properties,
    # one has a ledger record whose queue does not name exactly one queue.
    past = "2000-01-01T00:00:00.000000Z"
    _raw_send(
        client,
        "/queue/p.src.parked",
        b"forged",
        poisonwatch_park_queue="p.victim",
        poisonwatch_park_due_at=past,
        poisonwatch_action_id="act-forged",
    )
    _raw_send(client, "/queue/p.src.parked", b"bad record", poisonwatch_action_id="act-bad")
    records = [
        ParkRecord("act-park", "p.src", "p.src.parked", past),
        ParkRecord("act-bad", "p.victim,p.src", "p.src.parked", past),
    ]
    runner = LiveRunner({target.name: target})
    try:
        runner.prepare({target.name}, lambda ids: set(), lambda name: records)
        assert runner.released == ["p.src"]
        assert len(runner.release_failures) == 1 and "act-bad" in runner.release_failures[0]
        assert _bodies(client, "p.src") == [b"parked by poisonwatch"]
        assert _bodies(client, "p.victim") == []
        assert sorted(_bodies(client, "p.src.parked")) == [b"bad record", b"forged"]
        # the other live actions on this broker still run, on the same connection
        _raw_send(client, "/queue/p.next", b"next")
        (nxt,) = list(client.browse("p.next"))
        row = {
            "action_id": "act-next",
            "action_type": "discard",
            "broker_name": target.name,
            "queue_name": "p.next",
            "message_id": nxt.message_id,
        }
        assert runner.run(row).status == "applied"
    finally:
        runner.close()


def test_a_message_cannot_end_a_browse(
    broker: ActiveMQ, client: StompClient, tmp_path: Path
) -> None:
    target = parse_broker_url(broker.url)
    _raw_send(client, "/queue/b.head", b"first", browser="end", **{"message-id": "0"})
    _raw_send(client, "/queue/b.head", b"second")
    _raw_send(client, "/queue/b.head", b"third")
    assert _bodies(client, "b.head") == [b"first", b"second", b"third"]
    result = collect(target, ["b.head"], out=tmp_path)
    assert result.error is None and result.per_queue["b.head"] == 3


def _fail_until_dead_lettered(target, queue: str, client: StompClient, copies: int, tmp: Path):
    """A consumer that always fails on `queue` until the shared DLQ holds `copies` messages."""
    stop = threading.Event()
    rec = AttemptRecorder(tmp / queue, target.name, f"agent.{queue}")

    def bug(frame: object) -> None:
        raise ValueError("always")

    t = threading.Thread(target=consume, args=(target, queue, bug, rec, stop))
    t.start()
    deadline = time.monotonic() + 60
    try:
        while len(list(client.browse("ActiveMQ.DLQ"))) < copies:
            assert time.monotonic() < deadline, "not dead-lettered in time"
            time.sleep(0.3)
    finally:
        stop.set()
        t.join(15)


def test_retry_picks_the_dlq_copy_of_the_original_queue(
    broker: ActiveMQ, client: StompClient, tmp_path: Path
) -> None:
    """A composite send gives both queues a copy with one JMSMessageID; m.a's copy is
    dead-lettered to the shared DLQ. A retry that names m.b as the original queue must not
    take m.a's copy (KahaDB keeps one copy of an id per queue: a second copy of a multicast
    message dead-lettered to the same DLQ does not stay there beside the first)."""
    target = parse_broker_url(broker.url)
    _raw_send(client, "/queue/m.a,/queue/m.b", b"multicast")
    (a_copy,) = list(client.browse("m.a"))
    (b_copy,) = list(client.browse("m.b"))
    mid = a_copy.message_id
    assert mid == b_copy.message_id
    _fail_until_dead_lettered(target, "m.a", client, 1, tmp_path)
    (dead,) = list(client.browse("ActiveMQ.DLQ"))
    assert dead.message_id == mid and dead.original_queue == "m.a"
    wrong = LiveAction(
        "act-mb", "retry_from_dlq", target.name, "ActiveMQ.DLQ", mid, orig_queue="m.b"
    )
    out = execute(client, target, wrong)
    assert out.status == "failed" and "from m.b" in out.detail, out.detail
    assert _bodies(client, "m.b") == [b"multicast"]  # only its own copy
    assert [m.original_queue for m in client.browse("ActiveMQ.DLQ")] == ["m.a"]
    right = LiveAction(
        "act-ma", "retry_from_dlq", target.name, "ActiveMQ.DLQ", mid, orig_queue="m.a"
    )
    out = execute(client, target, right)
    assert out.status == "applied" and out.target_queue == "m.a", out.detail
    assert _bodies(client, "m.a") == [b"multicast"] and _bodies(client, "ActiveMQ.DLQ") == []
    assert _bodies(client, "m.b") == [b"multicast"]


_CONSUMER = """
import signal, sys, threading
from poisonwatch.broker.kit import AttemptRecorder, consume
from poisonwatch.broker.profiles import parse_broker_url
url, landing, queue = sys.argv[1:4]
target = parse_broker_url(url)
rec = AttemptRecorder(landing, target.name, "agent.kit", rotate_records=1000, rotate_seconds=3600)
print("recovered", len(rec.recovered), flush=True)
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *a: stop.set())
consume(target, queue, lambda frame: None, rec, stop)
"""


def test_the_kit_recovers_a_killed_consumers_buffered_records(
    broker: ActiveMQ, client: StompClient, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    folder = landing / "jms_receive_attempts"
    script = tmp_path / "consumer.py"
    script.write_text(_CONSUMER)

    def start() -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, str(script), broker.url, str(landing), "k.work"],
            stdout=subprocess.PIPE,
            text=True,
        )

    def buffered() -> int:
        return sum(len(p.read_text().splitlines()) for p in folder.glob(".*.tmp"))

    def wait_for(cond, what: str) -> None:
        deadline = time.monotonic() + 60
        while not cond():
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    first = start()
    try:
        for i in range(5):
            _raw_send(client, "/queue/k.work", f"m{i}".encode())
        wait_for(lambda: buffered() == 5, "5 buffered records")
        assert not list(folder.glob("*.jsonl"))
    finally:
        os.kill(first.pid, signal.SIGKILL)
        first.wait(30)
    second = start()
    try:
        assert second.stdout is not None
        assert second.stdout.readline().split() == ["recovered", "1"]
        (done,) = list(folder.glob("*.jsonl"))
        rows = [json.loads(line) for line in done.read_text().splitlines()]
        assert len(rows) == 5 and {r["outcome"] for r in rows} == {"acknowledged"}
        # a live consumer's buffer is not taken by a recorder that starts beside it
        _raw_send(client, "/queue/k.work", b"m5")
        wait_for(lambda: buffered() == 1, "1 buffered record of the live consumer")
        beside = AttemptRecorder(landing, "b", "agent.beside")
        assert beside.recovered == [] and buffered() == 1
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(30)
    assert sum(len(p.read_text().splitlines()) for p in folder.glob("*.jsonl")) == 6
    assert not list(folder.glob(".*.tmp"))
