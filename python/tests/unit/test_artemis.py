"""Artemis without a broker: artemis:// and brokers.yml `kind: artemis` parsing (stomp://
unchanged), JMX object names, the record built from a browse() entry, the one-line errors of an
unreachable endpoint, a refused login and a non-Artemis answer (a loopback HTTP server plays
each), and the distribution's pin and stamp."""

from __future__ import annotations

import http.server
import json
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.ports import free_port

from poisonwatch.broker import artemis_dist, live_brokers
from poisonwatch.broker.artemis import (
    MAX_ATTEMPTS_PROPERTY,
    ArtemisQueue,
    JolokiaClient,
    choose_queues,
    parse_object_name,
    quote_value,
    snapshot_row,
)
from poisonwatch.broker.client import BrokerError
from poisonwatch.broker.collect import BODY_ENCODING_PROPERTY, COLUMNS, collect
from poisonwatch.broker.profiles import load_profiles, parse_broker_url, resolve_broker
from poisonwatch.config import PoisonwatchError


def test_artemis_url_parts() -> None:
    t = parse_broker_url("artemis://ad%40min:p%3Ass@127.0.0.1:8170?name=b1")
    assert (t.kind, t.host, t.port, t.user, t.password) == (
        "artemis",
        "127.0.0.1",
        8170,
        "ad@min",
        "p:ss",
    )
    assert (t.name, t.named, t.tls) == ("b1", True, False)
    assert t.jolokia_url == "http://127.0.0.1:8170/console/jolokia"
    assert t.shared_dlq == "DLQ"


def test_artemis_url_defaults_and_refusals() -> None:
    t = parse_broker_url("artemis://mq.example.com")
    assert (t.port, t.name, t.named, t.user) == (8161, "mq.example.com:8161", False, None)
    assert resolve_broker("artemis://h:1").kind == "artemis"
    with pytest.raises(PoisonwatchError, match="bad port") as exc:
        parse_broker_url("artemis://u:topsecret@h:99999")
    assert "topsecret" not in str(exc.value)
    with pytest.raises(PoisonwatchError, match="takes no path"):
        parse_broker_url("artemis://h:1/console")


def test_a_refused_stomp_url_keeps_its_password_out_of_the_message() -> None:
    for url, words in (
        ("stomp://u:topsecret@h:99999", "bad port"),
        ("stomps://u:topsecret@h:61613", "must look like"),
    ):
        with pytest.raises(PoisonwatchError, match=words) as exc:
            parse_broker_url(url)
        assert "topsecret" not in str(exc.value) and "u:***@h" in str(exc.value)


def test_stomp_urls_are_unchanged() -> None:
    t = parse_broker_url("stomp://u:p@127.0.0.1:61613?name=c")
    assert (t.kind, t.name, t.port, t.user, t.password, t.shared_dlq) == (
        "classic",
        "c",
        61613,
        "u",
        "p",
        "ActiveMQ.DLQ",
    )
    with pytest.raises(PoisonwatchError, match="stomp://HOST:PORT"):
        parse_broker_url("http://h:1")


def test_brokers_yml_kind_artemis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ART_PW", "from-env")
    path = tmp_path / "brokers.yml"
    path.write_text(
        "brokers:\n"
        "  art:\n    kind: artemis\n    url: https://mq:8443/jolokia\n    user: pw\n"
        "    password_env: ART_PW\n"
        "  art2:\n    kind: artemis\n    url: artemis://mq:8161\n"
        "  classic:\n    url: stomp://mq:61613\n"
    )
    brokers = load_profiles(path)
    art = brokers["art"]
    assert (art.kind, art.tls, art.user, art.password) == ("artemis", True, "pw", "from-env")
    assert art.jolokia_url == "https://mq:8443/jolokia"
    assert art.name == "art" and art.named
    assert brokers["art2"].jolokia_url == "http://mq:8161/console/jolokia"
    assert brokers["classic"].kind == "classic"
    monkeypatch.setattr("poisonwatch.broker.profiles.profiles_path", lambda: path)
    # apply runs actions on both kinds; a --broker URL of Artemis must say which broker it is.
    assert set(live_brokers()) == {"art", "art2", "classic"}
    assert set(live_brokers(["artemis://h:1?name=b1"])) == {"art", "art2", "classic", "b1"}
    with pytest.raises(PoisonwatchError, match=r"\?name=BROKER") as err:
        live_brokers(["artemis://u:secret@h:1"])
    assert "secret" not in str(err.value)


@pytest.mark.parametrize(
    ("entry", "match"),
    [
        ("kind: rabbit\n    url: stomp://h:1", "is not `classic` or `artemis`"),
        ("url: artemis://h:1", "needs kind: artemis"),
        ("kind: artemis\n    url: stomp://h:1", "artemis://HOST:PORT"),
    ],
)
def test_brokers_yml_refuses_mismatched_kinds(tmp_path: Path, entry: str, match: str) -> None:
    path = tmp_path / "brokers.yml"
    path.write_text(f"brokers:\n  b:\n    {entry}\n")
    with pytest.raises(PoisonwatchError, match=match):
        load_profiles(path)


def test_object_names_round_trip_quoting() -> None:
    tricky = 'a "q",*?\\z\nx'
    name = (
        'org.apache.activemq.artemis:address="DLQ",broker="b",component=addresses,'
        f'queue={quote_value(tricky)},routing-type="anycast",subcomponent=queues'
    )
    domain, props = parse_object_name(name)
    assert domain == "org.apache.activemq.artemis"
    assert props["queue"] == tricky
    assert props["address"] == "DLQ" and props["component"] == "addresses"


def _dlq_entry() -> dict[str, object]:
    return {
        "messageID": "175",
        "userID": "",
        "priority": 4,
        "type": 4,
        "timestamp": 1796276599731,
        "redelivered": False,
        "BodyPreview": [0xFF - 256, 0x00, 0x41],
        "StringProperties": {
            "_AMQ_ORIG_ADDRESS": "orders",
            "_AMQ_ORIG_QUEUE": "orders",
            "_AMQ_GROUP_ID": "g1",
            "note": "\x1b[31m[red]x[/red]",
        },
        "LongProperties": {"_AMQ_ORIG_MESSAGE_ID": 65},
        "BooleanProperties": None,
    }


def test_a_browsed_dead_letter_becomes_a_contract_record() -> None:
    q = ArtemisQueue("m", "DLQ", "DLQ.orders", "multicast")
    row = snapshot_row("b", q, _dlq_entry(), "2026-01-01T00:00:00.000Z", {"orders": 10})
    assert list(row) == list(COLUMNS)
    assert (row["address"], row["queue_name"], row["message_id"]) == ("DLQ", "DLQ.orders", "175")
    assert (row["orig_address"], row["orig_queue"], row["group_id"]) == ("orders", "orders", "g1")
    assert row["delivery_count"] is None and row["priority"] == 4
    assert row["message_type"] == "bytes"
    assert row["enqueued_at"] == "2026-12-03T05:43:19.731Z"
    props = json.loads(str(row["properties"]))
    # Bytes that are not UTF-8 land as base64, marked as the Classic path marks them.
    assert row["body"] == "/wBB" and props[BODY_ENCODING_PROPERTY] == "base64"
    assert props[MAX_ATTEMPTS_PROPERTY] == "10" and props["JMSRedelivered"] == "false"
    assert props["_AMQ_ORIG_MESSAGE_ID"] == "65"
    # Attacker-controlled text is kept as data (JSON-escaped), as on the Classic path.
    assert props["note"] == "\x1b[31m[red]x[/red]"


def test_a_jms_message_id_and_text_body() -> None:
    entry = {"messageID": 7, "userID": "ID:abc", "type": 3, "text": "héllo"}
    row = snapshot_row("b", ArtemisQueue("m", "a", "a", "anycast"), entry, "t", {})
    assert (row["message_id"], row["body"], row["message_type"]) == ("ID:abc", "héllo", "text")
    entry = {"messageID": 7, "userID": "abc", "type": 3, "text": "x"}
    assert snapshot_row("b", ArtemisQueue("m", "a", "a", "x"), entry, "t", {})["message_id"] == (
        "ID:abc"
    )


def test_queues_chosen_and_every_dead_letter_queue() -> None:
    def q(address: str, name: str) -> ArtemisQueue:
        return ArtemisQueue(f"m-{name}", address, name, "anycast")

    queues = [
        q("orders", "orders"),
        q("billing", "billing"),
        q("DLQ", "DLQ.orders"),
        q("$sys.mqtt.sessions", "$sys.mqtt.sessions"),
        q("ExpiryQueue", "ExpiryQueue"),
    ]
    names = [x.name for x in choose_queues(queues, ["ord*"], {"DLQ"})]
    assert names == ["orders", "DLQ.orders"]
    names = [x.name for x in choose_queues(queues, [], {"DLQ"})]
    assert "$sys.mqtt.sessions" not in names and "billing" in names


class _Fake(http.server.BaseHTTPRequestHandler):
    status = 200
    body = b""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(self.status)
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def fake_server() -> Iterator[tuple[int, type[_Fake]]]:
    handler = type("Handler", (_Fake,), {})
    server = http.server.HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1], handler
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "body", "match"),
    [
        (403, b"<html>Forbidden</html>", r"refused user 'pw' \(HTTP 403\)"),
        (401, b"", r"refused user 'pw' \(HTTP 401\)"),
        (200, b"<html>a web shop</html>", "did not answer as Jolokia"),
        (404, b"not here", "HTTP 404: not an Artemis Jolokia endpoint"),
        (200, b'{"status":200,"value":[]}', "has no ActiveMQ Artemis broker"),
        (200, b'{"status":403,"error":"Origin x is not allowed"}', r"refused the request"),
    ],
)
def test_errors_are_one_line_naming_the_url(
    fake_server: tuple[int, type[_Fake]], tmp_path: Path, status: int, body: bytes, match: str
) -> None:
    port, handler = fake_server
    handler.status, handler.body = status, body
    target = parse_broker_url(f"artemis://pw:s3cret-pw@127.0.0.1:{port}")
    result = collect(target, [], out=tmp_path)
    assert result.error is not None
    assert "\n" not in result.error and "s3cret-pw" not in result.error
    assert f"http://127.0.0.1:{port}/console/jolokia" in result.error
    assert re.search(match, result.error), result.error


def test_an_unreachable_broker_is_one_line(tmp_path: Path) -> None:
    port = free_port()
    target = parse_broker_url(f"artemis://pw:s3cret-pw@127.0.0.1:{port}")
    result = collect(target, [], out=tmp_path)
    assert result.error is not None and result.error.startswith("cannot reach Artemis at http")
    assert "\n" not in result.error and "s3cret-pw" not in result.error
    with pytest.raises(BrokerError, match="cannot reach"):
        JolokiaClient(target, timeout=2).broker_name()


def test_the_distribution_pin_and_its_stamp(tmp_path: Path) -> None:
    artifact = artemis_dist.artemis_artifact()
    assert artifact.startswith("org.apache.activemq:apache-artemis:") and artifact.endswith(
        ":zip:bin"
    )
    assert artemis_dist.installed_home(tmp_path, artifact) is None
    home = tmp_path / "apache-artemis-x"
    (home / "bin").mkdir(parents=True)
    (home / "bin" / "artemis").write_text("#!/bin/sh\n")
    (tmp_path / artemis_dist.STAMP).write_text(
        json.dumps({"artifact": artifact, "home": home.name})
    )
    assert artemis_dist.installed_home(tmp_path, artifact) == home
    assert artemis_dist.installed_home(tmp_path, "g:a:9:zip:bin") is None
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.poisonwatch.artemis]\nartifact = "g:a:1"\n')
    with pytest.raises(PoisonwatchError, match="group:artifact:version:zip"):
        artemis_dist.artemis_artifact(bad)


def test_a_missing_mvn_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(PoisonwatchError, match=r"needs Maven \(`mvn`"):
        artemis_dist.fetch_artemis(tmp_path / "cache")
