"""The Java consumer kit (`java/`, seed 002) built with Maven and run as real JMS agents on one
real ActiveMQ Artemis (module-scoped, started and stopped by PID): its JUnit tests pass, every
delivery becomes one `jms_receive_attempts` record of the landing contract, written before the
rollback (a JVM halted right after a failure leaves it on disk, and the next agent completes the
file), the broker redelivers what the kit rolled back and dead-letters it after ten deliveries,
TemporaryUnavailableException is not counted by the fuse, and the fuse trips after N = M/3 failures
of one type: in mode ANY one server's report stops the setting, in mode MANY it takes two servers,
and then a later start on any server processes nothing.
"""

from __future__ import annotations

import collections
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support import java_kit
from support.artemis import AddressSetting, Artemis, broker_fixture, ensure_artemis

from poisonwatch.broker.artemis import JolokiaClient
from poisonwatch.broker.profiles import parse_artemis_url
from poisonwatch.warehouse.schemas import DATASETS

_why = ensure_artemis() or (None if shutil.which("mvn") else "mvn is not on PATH")
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

ROOT = Path(__file__).resolve().parents[3]
ATTEMPTS = 10
broker = broker_fixture(
    default=AddressSetting(
        max_delivery_attempts=ATTEMPTS,
        redelivery_delay_ms=20,
        redelivery_multiplier=1.5,
        max_redelivery_delay_ms=200,
        auto_create_dead_letter_resources=False,
    )
)


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    return java_kit.build(tmp_path_factory.mktemp("java-build"))


_agent = java_kit.agent


def _records(landing: Path, consumer: str | None = None) -> list[dict[str, Any]]:
    """The complete files' records (hidden buffers are not the contract's)."""
    folder = landing / "jms_receive_attempts"
    rows = [
        json.loads(ln)
        for f in sorted(folder.glob("*.jsonl"))
        for ln in f.read_text(encoding="utf-8").splitlines()
    ]
    return [r for r in rows if consumer is None or r["consumer_id"] == consumer]


def _count(broker: Artemis, queue: str) -> int:
    client = JolokiaClient(parse_artemis_url(broker.url))
    found = [q for q in client.queues() if q.name == queue]
    if not found:
        return 0
    read = {"type": "read", "mbean": found[0].mbean, "attribute": "MessageCount"}
    return int(client.request(read))


def test_records_follow_the_landing_contract_and_the_broker_dead_letters_after_ten(
    broker: Artemis, classpath: str, tmp_path: Path
) -> None:
    broker.send("kit.orders", ["o-1", "o-2"])
    # M = 90 (N = 30): the fuse stays whole while the broker redelivers both ten times.
    out = _agent(broker, classpath, tmp_path, "kit.orders", "agent.orders", "node-a", "bug",
                 max_failures=90)  # fmt: skip
    assert out["rc"] == 0 and not out["tripped"], out
    rows = _records(tmp_path)
    contract = DATASETS["jms_receive_attempts"]
    assert all(list(r) == contract.column_names for r in rows)
    required = [c.name for c in contract.columns if c.required]
    assert all(r[c] is not None for r in rows for c in required)
    by_message = collections.defaultdict(list)
    for r in rows:
        by_message[r["message_id"]].append(r)
    assert len(by_message) == 2 and all(m.startswith("ID:") for m in by_message)
    for attempts in by_message.values():
        assert [a["delivery_count"] for a in attempts] == list(range(1, ATTEMPTS + 1))
        assert [a["redelivered"] for a in attempts] == [False] + [True] * (ATTEMPTS - 1)
        assert {a["outcome"] for a in attempts} == {"rolled_back"}
        assert {a["exception_class"] for a in attempts} == {"java.lang.IllegalStateException"}
        assert "at dev.poisonwatch.kit.example.Agent" in attempts[0]["stack_trace"]
        assert len({a["activation_id"] for a in attempts}) == 1
        assert attempts[0]["attempted_at"].endswith("Z")
    assert _count(broker, "kit.orders") == 0 and _count(broker, "DLQ") >= 2


def test_a_record_is_on_disk_before_the_rollback(
    broker: Artemis, classpath: str, tmp_path: Path
) -> None:
    broker.send("kit.halt", ["h-1"])
    out = _agent(broker, classpath, tmp_path, "kit.halt", "agent.halt", "node-a", "bug",
                 halt_after=1)  # fmt: skip
    assert out["rc"] == 137, out
    buffers = list((tmp_path / "jms_receive_attempts").glob(".*.jsonl.part"))
    assert len(buffers) == 1 and _records(tmp_path) == []
    assert json.loads(buffers[0].read_text())["outcome"] == "rolled_back"
    # The next agent completes the dead one's file and goes on (healthy now).
    out = _agent(broker, classpath, tmp_path, "kit.halt", "agent.halt", "node-a", "healthy")
    assert out["rc"] == 0
    rows = _records(tmp_path)
    assert [r["outcome"] for r in rows] == ["rolled_back", "acknowledged"]
    # The broker counts the delivery it had dispatched to the halted JVM too.
    assert rows[0]["delivery_count"] == 1 and rows[1]["delivery_count"] >= 2
    assert rows[1]["redelivered"] is True
    assert not list((tmp_path / "jms_receive_attempts").glob(".*.jsonl.part"))


@pytest.mark.parametrize(
    ("behaviour", "outcome"),
    [("temporary:4", "temporarily_unavailable"), ("transient:2", "rolled_back")],
)
def test_transient_failures_recover_and_temporary_ones_do_not_count(
    broker: Artemis, classpath: str, tmp_path: Path, behaviour: str, outcome: str
) -> None:
    queue = f"kit.{behaviour.split(':')[0]}"
    broker.send(queue, ["t-1"])
    # N = 3: four TemporaryUnavailableExceptions in a row do not trip it.
    out = _agent(broker, classpath, tmp_path, queue, f"agent.{queue}", "node-a", behaviour)
    assert out["rc"] == 0 and not out["tripped"], out
    k = int(behaviour.split(":")[1])
    assert [r["outcome"] for r in _records(tmp_path)] == [outcome] * k + ["acknowledged"]
    assert _count(broker, queue) == 0


def test_the_fuse_in_mode_any_stops_the_setting_on_one_report(
    broker: Artemis, classpath: str, tmp_path: Path
) -> None:
    broker.send("kit.any", [f"a-{i}" for i in range(5)])
    out = _agent(broker, classpath, tmp_path, "kit.any", "agent.any", "node-a", "bug")
    assert out["rc"] == 0 and out["tripped"] and out["disabled"], out
    rows = _records(tmp_path)
    assert len(rows) == 3 and {r["outcome"] for r in rows} == {"rolled_back"}
    assert java_kit.board(broker)["agent.any"] == {"node-a"}
    assert _count(broker, "kit.any") == 5  # nothing lost, nothing dead-lettered
    # Another server's agent of the same setting starts disabled and takes nothing.
    again = _agent(broker, classpath, tmp_path, "kit.any", "agent.any", "node-b", "healthy")
    assert again["disabled"] and again["attempts"] == 0, again
    assert _count(broker, "kit.any") == 5


def test_the_fuse_in_mode_many_needs_two_servers(
    broker: Artemis, classpath: str, tmp_path: Path
) -> None:
    broker.send("kit.many", [f"m-{i}" for i in range(3)])
    first = _agent(broker, classpath, tmp_path, "kit.many", "agent.many", "node-a", "bug",
                   mode="MANY")  # fmt: skip
    # One server's report: tripped but not disabled, so it went on and the broker dead-lettered.
    assert first["tripped"] and not first["disabled"], first
    assert java_kit.board(broker)["agent.many"] == {"node-a"}
    assert len(_records(tmp_path, "agent.many")) == 3 * ATTEMPTS
    assert _count(broker, "kit.many") == 0
    broker.send("kit.many", [f"n-{i}" for i in range(3)])
    second = _agent(broker, classpath, tmp_path, "kit.many", "agent.many", "node-b", "bug",
                    mode="MANY")  # fmt: skip
    assert second["tripped"] and second["disabled"], second
    assert java_kit.board(broker)["agent.many"] == {"node-a", "node-b"}
    assert _count(broker, "kit.many") == 3
    third = _agent(broker, classpath, tmp_path, "kit.many", "agent.many", "node-a", "healthy",
                   mode="MANY")  # fmt: skip
    assert third["disabled"] and third["attempts"] == 0, third


def test_the_readmes_example_compiles_against_the_kit(classpath: str, tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```java\n(.*?)```", text, re.S)
    assert len(blocks) == 1, "the README has one Java example"
    source = tmp_path / "ReadmeExample.java"
    source.write_text(
        "import dev.poisonwatch.kit.*;\nimport jakarta.jms.*;\nimport java.nio.file.Path;\n"
        "class ReadmeExample {\n    static void handle(Message message) {}\n"
        "    static void example(Connection connection) throws JMSException {\n"
        f"{blocks[0]}    }}\n}}\n"
    )
    proc = subprocess.run(
        ["javac", "-Xlint:all", "-Werror", "-cp", classpath, "-d", str(tmp_path / "out"),
         str(source)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
