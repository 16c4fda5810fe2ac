"""`poisonwatch.broker` against one real ActiveMQ Classic broker (module-scoped, started and
stopped by PID): collect browses without consuming and lands the contract's columns, the kit
records attempts and re-raises unchanged, actions move one message by id exactly once, and a
broker that dies mid-collect leaves complete files and a clear error. No Spark here: the
end-to-end chain with ingest and dbt is test_broker_e2e.py."""

from __future__ import annotations

import base64
import json
import threading
import time
from pathlib import Path

import pytest
from support.activemq import ActiveMQ, broker_fixture, client_fixture, ensure_activemq

from poisonwatch.broker.actions import (
    ACTION_PROPERTY,
    JOURNAL_QUEUE,
    LiveAction,
    ParkRecord,
    execute,
    prune_journal,
    release_parked,
)
from poisonwatch.broker.client import BrokerGoneError, StompClient, selector_string
from poisonwatch.broker.collect import BODY_ENCODING_PROPERTY, COLUMNS, collect
from poisonwatch.broker.kit import AttemptRecorder, TemporarilyUnavailable, consume
from poisonwatch.broker.profiles import parse_broker_url
from poisonwatch.warehouse.schemas import DATASETS

_why = ensure_activemq()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")


broker = broker_fixture(max_redeliveries=2)
client = client_fixture()


def _send(client: StompClient, queue: str, body: bytes, **headers: str) -> None:
    client.send(queue, body, {"persistent": "true", **headers})
    client.sync()


def _ids(client: StompClient, queue: str) -> list[str]:
    return [m.message_id for m in client.browse(queue)]


def _read(folder: Path) -> list[dict]:
    return [
        json.loads(ln) for f in sorted(folder.glob("*.jsonl")) for ln in f.read_text().splitlines()
    ]


def test_contract_columns_match_the_landing_contract() -> None:
    from poisonwatch.broker.kit import COLUMNS as KIT_COLUMNS

    assert list(COLUMNS) == DATASETS["jms_queue_snapshots"].column_names
    assert list(KIT_COLUMNS) == DATASETS["jms_receive_attempts"].column_names


def test_collect_browses_queues_and_dlqs_without_consuming(
    broker: ActiveMQ, client: StompClient, tmp_path: Path
) -> None:
    target = parse_broker_url(broker.url)
    _send(client, "c.orders", b"plain text", type="OrderPlaced", region="eu'west")
    _send(client, "c.orders", b"\x00\xff\x10binary")
    _send(client, "c.orders", b"[red]x[/red] \x1b[31m", evil="\x1b]0;t\x07")
    _send(client, "c.payments", b"poison")
    # A consumer that always fails: the broker redelivers twice, then dead-letters it.
    stop = threading.Event()
    rec = AttemptRecorder(tmp_path / "landing", target.name, "agent.payments")

    def bug(frame: object) -> None:
        raise ValueError("always")

    t = threading.Thread(target=consume, args=(target, "c.payments", bug, rec, stop))
    t.start()
    deadline = time.monotonic() + 30
    while not _ids(client, "DLQ.c.payments") and time.monotonic() < deadline:
        time.sleep(0.3)
    stop.set()
    t.join(10)

    result = collect(target, ["c.*"], out=tmp_path / "landing")
    assert result.error is None and result.listed
    rows = _read(tmp_path / "landing" / "jms_queue_snapshots")
    by_queue: dict[str, list[dict]] = {}
    for r in rows:
        assert list(r) == list(COLUMNS)
        by_queue.setdefault(r["queue_name"], []).append(r)
    # wildcard c.* plus the DLQ of c.payments; nothing consumed
    assert set(by_queue) >= {"c.orders", "DLQ.c.payments"}
    assert len(by_queue["c.orders"]) == 3 and len(_ids(client, "c.orders")) == 3
    text, binary, hostile = by_queue["c.orders"]
    assert text["body"] == "plain text" and text["message_type"] == "OrderPlaced"
    assert json.loads(text["properties"]) == {"region": "eu'west"}
    assert text["enqueued_at"].endswith("Z") and text["priority"] == 4
    assert base64.b64decode(binary["body"]) == b"\x00\xff\x10binary"
    assert json.loads(binary["properties"])[BODY_ENCODING_PROPERTY] == "base64"
    assert hostile["body"] == "[red]x[/red] \x1b[31m"  # landed verbatim; rendering escapes it
    (dead,) = by_queue["DLQ.c.payments"]
    assert dead["orig_queue"] == "c.payments" and dead["orig_address"] == "c.payments"
    assert dead["body"] == "poison"
    # the kit saw three deliveries (1 + 2 redeliveries), all rolled back, then the DLQ
    attempts = _read(tmp_path / "landing" / "jms_receive_attempts")
    assert [a["delivery_count"] for a in attempts] == [1, 2, 3]
    assert [a["redelivered"] for a in attempts] == [False, True, True]
    assert {a["outcome"] for a in attempts} == {"rolled_back"}
    assert attempts[0]["exception_class"] == "ValueError"
    assert attempts[0]["message_id"] == dead["message_id"]


def test_kit_records_outside_and_reraises_the_same_exception(tmp_path: Path) -> None:
    class Frame:
        def __init__(self) -> None:
            self.headers = {"message-id": "ID:1", "destination": "/queue/q", "redelivered": "true"}

    rec = AttemptRecorder(tmp_path, "b", "agent.x", server_name="s1", activation_id="act-1")
    boom = KeyError("missing")
    with pytest.raises(KeyError) as info, rec.attempt(Frame()):
        raise boom
    assert info.value is boom
    with pytest.raises(TemporarilyUnavailable), rec.attempt(Frame()):
        raise TemporarilyUnavailable("not replicated yet")
    assert rec.wrap(lambda f: 42)(Frame()) == 42
    assert not list((tmp_path / "jms_receive_attempts").glob("*.jsonl"))  # not yet complete
    rec.close()
    rows = _read(tmp_path / "jms_receive_attempts")
    assert [r["outcome"] for r in rows] == [
        "rolled_back",
        "temporarily_unavailable",
        "acknowledged",
    ]
    assert rows[0]["exception_class"] == "KeyError" and "missing" in rows[0]["exception_message"]
    assert "Traceback" in rows[0]["stack_trace"]
    assert [r["delivery_count"] for r in rows] == [2, 3, 4]  # redelivered: at least the 2nd
    assert rows[1]["exception_class"] == "poisonwatch.broker.kit.TemporarilyUnavailable"
    assert {(r["server_name"], r["activation_id"], r["consumer_id"]) for r in rows} == {
        ("s1", "act-1", "agent.x")
    }


def test_actions_move_one_message_exactly_once(broker: ActiveMQ, client: StompClient) -> None:
    target = parse_broker_url(broker.url)
    for i in range(4):
        _send(client, "a.work", f"m{i}".encode(), n=str(i))
    ids = _ids(client, "a.work")
    dl = LiveAction("act-dl", "dead_letter", target.name, "a.work", ids[0], reason="poison")
    first = execute(client, target, dl)
    assert first.status == "applied" and first.target_queue == "DLQ.a.work"
    # a re-run (ledger never written) finds the marker: no second move
    again = execute(client, target, dl)
    assert again.status == "already_applied"
    (moved,) = list(client.browse("DLQ.a.work"))
    assert moved.body == b"m0" and moved.properties[ACTION_PROPERTY] == "act-dl"
    assert moved.properties["poisonwatch_source_message_id"] == ids[0]
    assert moved.original_queue == "a.work" and moved.properties["n"] == "0"
    # retry it back to its queue, by its new id in the DLQ
    back = LiveAction(
        "act-r", "retry_from_dlq", target.name, "DLQ.a.work", moved.message_id, orig_queue="a.work"
    )
    assert execute(client, target, back).status == "applied"
    assert not _ids(client, "DLQ.a.work")
    assert sorted(m.body for m in client.browse("a.work")) == [b"m0", b"m1", b"m2", b"m3"]
    # discard, park (due now), a message that does not exist, a quote in the id
    assert (
        execute(
            client, target, LiveAction("act-x", "discard", target.name, "a.work", ids[1])
        ).status
        == "applied"
    )
    park = LiveAction("act-p", "park", target.name, "a.work", ids[2], park_delay_minutes=0)
    assert execute(client, target, park).target_queue == "a.work.parked"
    gone = execute(
        client, target, LiveAction("act-g", "discard", target.name, "a.work", "ID:nope' or '1'='1")
    )
    assert gone.status == "failed" and "not in queue a.work" in gone.detail
    assert [m.body for m in client.browse("a.work")] == [b"m3", b"m0"]
    assert [m.body for m in client.browse("a.work.parked")] == [b"m2"]
    record = ParkRecord("act-p", "a.work", "a.work.parked", "2000-01-01T00:00:00.000000Z")
    assert release_parked(client, [record]).released == ["a.work"]
    assert sorted(m.body for m in client.browse("a.work")) == [b"m0", b"m2", b"m3"]
    # journal markers of committed actions are pruned, others stay
    assert prune_journal(client, {"act-dl", "act-r", "act-x"}) == 3
    left = {m.properties[ACTION_PROPERTY] for m in client.browse(JOURNAL_QUEUE)}
    assert left == {"act-p"}
    assert client.find(JOURNAL_QUEUE, f"{ACTION_PROPERTY} = {selector_string('act-p')}")


def test_collect_keeps_finished_files_when_the_broker_dies(
    broker: ActiveMQ, client: StompClient, tmp_path: Path
) -> None:
    target = parse_broker_url(broker.url)
    _send(client, "d.one", b"x")
    out = tmp_path / "landing"
    box: dict = {}
    t = threading.Thread(
        target=lambda: box.update(r=collect(target, ["d.one"], out=out, every=0.3, count=500))
    )
    t.start()
    deadline = time.monotonic() + 30
    while len(list((out / "jms_queue_snapshots").glob("*-d.one.jsonl"))) < 2:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    broker.stop(kill=True)
    t.join(60)
    result = box["r"]
    assert result.error and target.name in result.error
    files = list((out / "jms_queue_snapshots").glob("*.jsonl"))
    assert len(files) == len(result.files) >= 2
    assert not list((out / "jms_queue_snapshots").glob(".*"))  # no half-written file
    rows = _read(out / "jms_queue_snapshots")
    assert {r["body"] for r in rows if r["queue_name"] == "d.one"} == {"x"}
    assert len({r["snapshot_at"] for r in rows}) >= 2  # one snapshot per round
    with pytest.raises(BrokerGoneError):
        StompClient(target, timeout=3).connect()
    broker.start()


def test_collect_command_line(broker: ActiveMQ, tmp_path: Path) -> None:
    """The CLI path: exit 0 with files; a broker that is not there: exit 1, a clear message."""
    import subprocess
    import sys

    from support.ports import free_port

    exe = str(Path(sys.executable).parent / "poisonwatch")
    ok = subprocess.run(
        [exe, "collect", "--broker", broker.url, "--queues", "c.orders", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "c.orders: 3" in ok.stdout
    assert len(_read(tmp_path / "jms_queue_snapshots")) >= 3
    dead = f"stomp://127.0.0.1:{free_port()}?name=nobody"
    bad = subprocess.run(
        [exe, "collect", "--broker", dead, "--out", str(tmp_path / "x")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 1
    assert "cannot connect to broker nobody" in bad.stdout + bad.stderr
