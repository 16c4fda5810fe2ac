"""`poisonwatch collect` against a stock ActiveMQ Classic (Debian's package as it starts itself:
no xstream/jettison on the broker's class path, so it drops a connection that asks for JSON
advisories) with a stomp+ssl connector whose keystore keytool makes in the test's temp folder,
signed by a test CA; a second CA signs nothing the broker has."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.activemq import ActiveMQ, ensure_activemq, started

from poisonwatch.broker.client import StompClient
from poisonwatch.broker.profiles import parse_broker_url

_why = ensure_activemq()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")
EXE = str(Path(sys.executable).parent / "poisonwatch")


@pytest.fixture(scope="module")
def stock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, object]]:
    from support.activemq import make_ca, make_keystore

    folder = tmp_path_factory.mktemp("activemq-stock")
    tls = folder / "tls"
    good = make_ca(tls, "good")
    other = make_ca(tls, "other")
    keystore = make_keystore(tls, "good")
    with started(folder / "broker", stock=True, keystore=keystore) as b:
        with StompClient(parse_broker_url(b.url)) as c:
            for body in (b"one", b"two"):
                c.send("s.orders", body, {"persistent": "true"})
            c.sync()
        yield {"broker": b, "good": good, "other": other}


def _collect(*args: str, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, "collect", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
        env={**__import__("os").environ, "COLUMNS": "200"},
    )


def _rows(out: Path) -> list[str]:
    return [
        line
        for f in (out / "jms_queue_snapshots").glob("*.jsonl")
        for line in f.read_text().splitlines()
    ]


def test_named_queues_are_browsed_without_the_listing(stock: dict, tmp_path: Path) -> None:
    b: ActiveMQ = stock["broker"]
    run = _collect("--broker", b.url, "--queues", "s.orders,ActiveMQ.DLQ", out=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "s.orders: 2" in run.stdout and "lost the connection" not in run.stdout + run.stderr
    assert len(_rows(tmp_path)) == 2


@pytest.mark.parametrize("queues", [None, "s.*"])
def test_without_names_it_says_what_the_broker_lacks(
    stock: dict, tmp_path: Path, queues: str | None
) -> None:
    b: ActiveMQ = stock["broker"]
    args = ["--broker", b.url] + (["--queues", queues] if queues else [])
    run = _collect(*args, out=tmp_path)
    text = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 1, text
    assert "xstream and jettison" in text and "--queues" in text, text
    assert "lost the connection" not in text


def test_stomp_ssl_verifies_the_broker_certificate(stock: dict, tmp_path: Path) -> None:
    b: ActiveMQ = stock["broker"]
    args = ["--broker", b.ssl_url, "--queues", "s.orders"]
    ok = _collect(*args, "--ca-file", str(stock["good"]), out=tmp_path / "ok")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "s.orders: 2" in ok.stdout and len(_rows(tmp_path / "ok")) == 2
    for name, extra in (("other", ["--ca-file", str(stock["other"])]), ("none", [])):
        bad = _collect(*args, *extra, out=tmp_path / name)
        text = " ".join((bad.stdout + bad.stderr).split())
        assert bad.returncode == 1, text
        assert "TLS certificate not accepted" in text, text
        assert not (tmp_path / name / "jms_queue_snapshots").exists() or not _rows(tmp_path / name)
    # the CA in brokers.yml-style URL form, and plain stomp:// with a CA file is refused
    target = parse_broker_url(b.ssl_url + f"&ca_file={stock['good']}")
    with StompClient(target) as c:
        assert [m.body for m in c.browse("s.orders")] == [b"one", b"two"]
    plain = _collect("--broker", b.url, "--ca-file", str(stock["good"]), out=tmp_path / "p")
    assert plain.returncode != 0 and "stomp+ssl" in plain.stdout + plain.stderr
