"""`poisonwatch serve --broker` against a real ActiveMQ Classic broker (started here on
127.0.0.1, stopped by PID): the server browses the broker's queues and dead-letter queues into
its landing folder on its own, ingests and builds them, and its marts show what the broker holds
(a dead-lettered message in `dlq_messages` with its original queue, the queue's messages in the
raw snapshots), queried over the server's Thrift port. When the broker goes away, the cycle
names it as its error and the server carries on; SIGTERM ends it with exit 0.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.activemq import ensure_activemq, started

from poisonwatch.broker.client import StompClient
from poisonwatch.broker.kit import AttemptRecorder, consume
from poisonwatch.broker.profiles import parse_broker_url
from poisonwatch.warehouse.engine import ThriftEngine
from poisonwatch.warehouse.server import running_server

_why = ensure_activemq()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"


def _dead_letter(target: Any, queue: str, kit: Path) -> None:
    """A consumer that always fails until the broker has moved the message to DLQ.<queue>."""
    stop = threading.Event()
    recorder = AttemptRecorder(kit, target.name, "agent.payments")

    def bug(frame: object) -> None:
        raise ValueError("always")

    thread = threading.Thread(target=consume, args=(target, queue, bug, recorder, stop))
    thread.start()
    try:
        with StompClient(target) as client:
            deadline = time.monotonic() + 60
            while not list(client.browse(f"DLQ.{queue}")):
                assert time.monotonic() < deadline, "the broker never dead-lettered the message"
                time.sleep(0.3)
    finally:
        stop.set()
        thread.join(10)
        recorder.close()


def _wait(
    server: subprocess.Popen[str], store: Path, ready: Any, what: str, log: Path
) -> dict[str, Any]:
    deadline = time.monotonic() + 900
    while time.monotonic() < deadline:
        assert server.poll() is None, f"serve exited waiting for {what}:\n{log.read_text()[-3000:]}"
        found = running_server(store)
        if found is not None and ready(found.status):
            return found.status
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}:\n{log.read_text()[-3000:]}")


@pytest.mark.slow
def test_serve_collects_a_live_broker_builds_it_and_outlives_it(tmp_path: Path) -> None:
    store, landing, log = tmp_path / "home", tmp_path / "landing", tmp_path / "serve.log"
    landing.mkdir()
    with started(tmp_path / "activemq", max_redeliveries=1) as broker:
        target = parse_broker_url(broker.url)
        with StompClient(target) as client:
            for i in range(3):
                client.send("s.orders", f"order {i}".encode(), {"persistent": "true"})
            client.send("s.payments", b"poison", {"persistent": "true"})
            client.sync()
        _dead_letter(target, "s.payments", tmp_path / "kit")
        env = {
            **os.environ,
            "POISONWATCH_HOME": str(store),
            "POISONWATCH_TARGET": "local",
            "TMPDIR": str(tmp_path),
        }
        with open(log, "w") as out:
            server = subprocess.Popen(
                [str(BIN), "serve", "--port", "0", "--broker", broker.url,
                 "--landing", str(landing), "--every", "1s", "--collect-every", "5s",
                 "--no-data-tests"],
                env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
        try:
            # Once the first cycle has collected, the broker goes: the next cycle's collect
            # then fails instead of browsing the same messages into a second build.
            _wait(
                server,
                store,
                lambda s: s.get("step") in ("ingest", "build") or s.get("last_cycle"),
                "the first cycle's collect",
                log,
            )
        except BaseException:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=60)
            raise
    try:
        # The broker is gone: a later cycle says so, and the server keeps serving.
        status = _wait(
            server,
            store,
            lambda s: "collect" in str((s.get("last_error") or {}).get("message", "")),
            "a cycle that names the lost broker",
            log,
        )
        assert status["last_error"]["cycle"] >= 2, status
        # The first cycle took what the broker held and built it.
        said = " ".join(log.read_text().split())  # a long line may have wrapped
        first = said[said.index("cycle 1 · ") :].split("cycle 2 · ")[0]
        assert "collected 4 messages" in first and " build " in first, first  # 3 + 1 in DLQ
        assert len(list((landing / "jms_queue_snapshots").glob("*.jsonl"))) >= 2
        engine = ThriftEngine("local", {"host": "127.0.0.1", "port": status["port"]})
        try:
            _, dead = engine.query(
                "select orig_queue, body_preview, is_in_dlq_snapshot "
                f"from poisonwatch.dlq_messages where broker_name = '{target.name}'"
            )
            assert [tuple(r) for r in dead] == [("s.payments", "poison", True)]
            _, queued = engine.query(
                "select count(distinct message_id) from raw.jms_queue_snapshots "
                "where queue_name = 's.orders'"
            )
            assert queued[0][0] == 3
        finally:
            engine.close()
        assert target.name in status["last_error"]["message"], status
        os.killpg(server.pid, signal.SIGTERM)
        assert server.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=60)
