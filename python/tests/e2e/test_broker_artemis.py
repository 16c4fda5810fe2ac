"""`poisonwatch collect` against one real ActiveMQ Artemis broker (module-scoped, started and
stopped by PID): messages a consumer fails ten times are dead-lettered by the broker, and
collect lands every one of them, and the messages still on the live queue, message by message
as the broker holds them, without consuming anything. Wrong credentials give one line.

How the consumer fails a message matters on Artemis: a STOMP NACK acknowledges the message (it
is gone, not redelivered), and so does an ACK inside a transaction that is then aborted; a
consumer that closes its connection without acknowledging hands the message back with its
delivery count raised, which is what dead-letters it after max-delivery-attempts. The first
test pins that down.
"""

from __future__ import annotations

import json
import queue
from pathlib import Path
from typing import Any

import pytest
import stomp
from support.artemis import AddressSetting, Artemis, broker_fixture, ensure_artemis

from poisonwatch.broker.artemis import MAX_ATTEMPTS_PROPERTY, JolokiaClient
from poisonwatch.broker.client import StompClient, selector_string
from poisonwatch.broker.collect import COLUMNS, DATASET, collect
from poisonwatch.broker.landing import SETTINGS_DATASET
from poisonwatch.broker.profiles import parse_broker_url
from poisonwatch.warehouse.schemas import DATASETS

_why = ensure_artemis()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

ATTEMPTS = 10
SHORT_ATTEMPTS = 2
broker = broker_fixture(
    default=AddressSetting(
        max_delivery_attempts=ATTEMPTS, redelivery_delay_ms=20, max_redelivery_delay_ms=100
    ),
    overrides={
        "short.#": AddressSetting(
            max_delivery_attempts=SHORT_ATTEMPTS,
            redelivery_delay_ms=20,
            redelivery_multiplier=2.0,
            max_redelivery_delay_ms=100,
        )
    },
)


def _stomp(broker: Artemis) -> StompClient:
    return StompClient(parse_broker_url(broker.stomp_url)).connect()


def _send(broker: Artemis, queue_name: str, bodies: list[tuple[str, dict[str, str]]]) -> None:
    with _stomp(broker) as client:
        for body, headers in bodies:
            client.send(queue_name, body.encode(), {"persistent": "true", **headers})
        client.sync()


def _jolokia(broker: Artemis) -> JolokiaClient:
    return JolokiaClient(parse_broker_url(broker.url))


def _on_broker(broker: Artemis) -> dict[str, list[dict[str, Any]]]:
    """Every queue's browse, straight from the broker (not through collect)."""
    client = _jolokia(broker)
    return {q.name: client.browse(q) for q in client.queues()}


def _fail(broker: Artemis, queue_name: str, selector: str) -> int:
    """Receive matching messages and close without acknowledging, until none comes; returns
    the number of deliveries."""
    deliveries = 0
    while True:
        client = _stomp(broker)
        try:
            got = client.take(queue_name, selector, wait=3.0)
        finally:
            client.close()
        if got is None:
            return deliveries
        deliveries += 1


def _raw_connection(broker: Artemis) -> tuple[Any, queue.Queue[Any]]:
    frames: queue.Queue[Any] = queue.Queue()

    class Listener(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            frames.put(frame)

    conn = stomp.Connection12([("127.0.0.1", broker.port)], heartbeats=(0, 0), auto_decode=False)
    conn.set_listener("test", Listener())
    conn.connect(broker.user, broker.password, wait=True, headers={"host": "localhost"})
    return conn, frames


def _count(broker: Artemis, queue_name: str) -> int:
    client = _jolokia(broker)
    (q,) = [q for q in client.queues() if q.name == queue_name]
    return int(client.request({"type": "read", "mbean": q.mbean, "attribute": "MessageCount"}))


def test_stomp_nack_and_aborted_ack_remove_the_message_on_artemis(broker: Artemis) -> None:
    for queue_name, how in (("nack.q", "nack"), ("abort.q", "abort")):
        _send(broker, queue_name, [("m", {})])
        conn, frames = _raw_connection(broker)
        try:
            conn.subscribe(f"/queue/{queue_name}", id="s", ack="client-individual")
            frame = frames.get(timeout=10)
            if how == "nack":
                conn.nack(frame.headers["ack"])
            else:
                conn.begin("tx")
                conn.ack(frame.headers["ack"], transaction="tx")
                conn.abort("tx")
            with pytest.raises(queue.Empty):
                frames.get(timeout=2)
        finally:
            conn.disconnect()
        assert _count(broker, queue_name) == 0, how
        assert not any(
            (m.get("StringProperties") or {}).get("_AMQ_ORIG_QUEUE") == queue_name
            for msgs in _on_broker(broker).values()
            for m in msgs
        ), how


def test_collect_lands_dead_letters_and_live_messages_without_consuming(
    broker: Artemis, tmp_path: Path
) -> None:
    poison = [
        (f"poison-{i} ünïcode", {"kind": "poison", "JMSXGroupID": f"grp-{i}", "seq": str(i)})
        for i in range(3)
    ]
    live = [(f"live-{i}", {"kind": "live", "seq": str(i)}) for i in range(2)]
    _send(broker, "orders.in", poison + live)

    deliveries = _fail(broker, "orders.in", f"kind = {selector_string('poison')}")
    assert deliveries == ATTEMPTS * len(poison)

    before = _on_broker(broker)
    dlq = f"DLQ.{'orders.in'}"
    assert len(before[dlq]) == len(poison)
    assert len(before["orders.in"]) == len(live)

    result = collect(parse_broker_url(broker.url), ["orders.*"], out=tmp_path)
    assert result.error is None, result.error
    assert result.broker_name == broker.name
    rows = [
        json.loads(line)
        for f in sorted((tmp_path / DATASET).glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    assert not list((tmp_path / DATASET).glob(".*.tmp"))
    assert all(list(r) == list(COLUMNS) for r in rows)
    by_queue: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_queue.setdefault(r["queue_name"], []).append(r)

    # Message by message, against what the broker holds.
    for queue_name in (dlq, "orders.in"):
        landed = {r["body"]: r for r in by_queue[queue_name]}
        assert len(landed) == len(before[queue_name]), queue_name
        for msg in before[queue_name]:
            props = msg["StringProperties"] or {}
            body = bytes(b & 0xFF for b in msg["BodyPreview"]).decode()
            r = landed[body]
            p = json.loads(r["properties"])
            assert r["broker_name"] == broker.name
            assert r["address"] == ("DLQ" if queue_name == dlq else "orders.in")
            assert r["message_id"] == str(msg["messageID"])
            assert r["priority"] == msg["priority"]
            assert p["kind"] == props["kind"] and p["seq"] == props["seq"]
            assert r["enqueued_at"] and r["enqueued_at"].endswith("Z")
            # Artemis' management browse has no delivery count; see broker/artemis.py.
            assert r["delivery_count"] is None
            if queue_name == dlq:
                assert r["orig_address"] == "orders.in"
                assert r["orig_queue"] == "orders.in"
                assert r["group_id"] == f"grp-{props['seq']}"
                assert p[MAX_ATTEMPTS_PROPERTY] == str(ATTEMPTS)
                assert p["JMSRedelivered"] == "false"
            else:
                assert r["orig_address"] is None and r["orig_queue"] is None
                assert r["group_id"] is None
    assert {r["body"] for r in by_queue[dlq]} == {b for b, _ in poison}
    assert {r["body"] for r in by_queue["orders.in"]} == {b for b, _ in live}

    # Nothing consumed: the broker holds the same messages after collect.
    after = _on_broker(broker)
    for queue_name in (dlq, "orders.in"):
        assert sorted(m["messageID"] for m in after[queue_name]) == sorted(
            m["messageID"] for m in before[queue_name]
        )


def test_a_wrong_password_is_one_line_without_the_password(broker: Artemis, tmp_path: Path) -> None:
    wrong = "not-the-pw-123"
    target = parse_broker_url(
        f"artemis://{broker.user}:{wrong}@127.0.0.1:{broker.http_port}?name={broker.name}"
    )
    result = collect(target, [], out=tmp_path)
    assert result.error is not None
    assert "\n" not in result.error
    assert target.jolokia_url in result.error
    assert wrong not in result.error and broker.password not in result.error
    assert "refused" in result.error
    assert not result.files


def test_a_per_address_override_dead_letters_sooner(broker: Artemis, tmp_path: Path) -> None:
    _send(broker, "short.q", [("short-poison", {"kind": "poison"})])
    assert _fail(broker, "short.q", f"kind = {selector_string('poison')}") == SHORT_ATTEMPTS
    result = collect(parse_broker_url(broker.url), ["short.*"], out=tmp_path)
    assert result.error is None, result.error
    rows = [
        json.loads(line)
        for f in sorted((tmp_path / DATASET).glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]
    (row,) = [r for r in rows if r["queue_name"] == "DLQ.short.q"]
    assert (row["orig_address"], row["orig_queue"], row["body"]) == (
        "short.q",
        "short.q",
        "short-poison",
    )
    assert json.loads(row["properties"])[MAX_ATTEMPTS_PROPERTY] == str(SHORT_ATTEMPTS)
    assert not [r for r in rows if r["queue_name"] == "short.q"]

    # The broker's own settings land beside the browse: one row per browsed queue, the
    # settings of its address as Artemis resolved the matches (`short.#` over `#`).
    (settings_file,) = (tmp_path / SETTINGS_DATASET).glob("*.jsonl")
    settings = [json.loads(line) for line in settings_file.read_text().splitlines()]
    assert all(list(r) == DATASETS[SETTINGS_DATASET].column_names for r in settings)
    assert {r["queue_name"] for r in settings} == {r["queue_name"] for r in rows} | {"short.q"}
    by_queue = {r["queue_name"]: r for r in settings}
    assert {k: v for k, v in by_queue["short.q"].items() if k != "snapshot_at"} == {
        "broker_name": broker.name,
        "address": "short.q",
        "queue_name": "short.q",
        "max_delivery_attempts": SHORT_ATTEMPTS,
        "redelivery_delay_ms": 20,
        "redelivery_multiplier": 2.0,
        "max_redelivery_delay_ms": 100,
        "dead_letter_address": "DLQ",
    }
    dead = by_queue["DLQ.short.q"]
    assert (dead["address"], dead["max_delivery_attempts"], dead["redelivery_multiplier"]) == (
        "DLQ",
        ATTEMPTS,
        1.0,
    )
    assert {r["snapshot_at"] for r in settings} == {r["snapshot_at"] for r in rows}
