"""The real-broker oracle on ActiveMQ Artemis (issue 69 §5): Java agents of seed 002 built on the
kit (`java/`) consume a real Artemis with a geometric redelivery delay (×1.5) and ten deliveries;
`collect` browses it through Jolokia; ingest and dbt build the marts; `poison_messages`,
`dlq_messages` and `consumer_circuit_breakers` agree message by message with what Artemis did
(its DLQ, its delivery counts) and with what the kit's fuse decided (its reports on the board).
Then `poisonwatch replay` + `apply` retry the DLQ group on the broker after the bug is "fixed",
and the agent consumes every message once. agent.art-billing's policy says `on_trip =
pause_queue` (its platform cannot be reached): the same `apply` pauses art.billing on the broker,
its messages wait there, `poisonwatch resume` turns it back on (refused without a connection
to the broker), the next build plans no pause again, and three new failures of one type after
the resume (N = 3) plan a new one.

Agents (one server each, `node-1`):
- agent.art-audit     healthy, 20 messages: never in poison_messages;
- agent.art-payments  undetectable transient failure on the first 2 deliveries, 20 messages,
  M = 3000 (a seed row): recovered, fuse whole;
- agent.art-docs      TemporaryUnavailableException on the first 3 deliveries, 20 messages, the
  default fuse (M = 10, N = 3): not counted, so recovered and the fuse whole;
- agent.art-orders    a permanent bug, 30 messages, M = 3000: Artemis dead-letters each after 6
  deliveries (art.orders' own address-setting; the seed's jms row says 10): poison, in the DLQ,
  judged by the broker's 6 (collect lands the settings, the policy models use them);
- agent.art-billing   the same bug, 10 messages, the default fuse (a seed row: on_trip =
  pause_queue): it trips after 3 failures of one type, the agent stops, the messages stay on
  their queue; the breaker mart says tripped.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import java_kit
from support.artemis import AddressSetting, Artemis, ensure_artemis, started
from support.child_python import run_py

from poisonwatch.broker.artemis import JolokiaClient, snapshot_row
from poisonwatch.broker.artemis_actions import ArtemisActions
from poisonwatch.broker.collect import collect
from poisonwatch.broker.profiles import parse_artemis_url

_why = ensure_artemis()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"
ATTEMPTS = 10
ORDERS_ATTEMPTS = 6  # art.orders' address-setting: not the seed's 10
AGENTS = (  # queue, consumer, behaviour, messages
    ("art.audit", "agent.art-audit", "healthy", 20),
    ("art.payments", "agent.art-payments", "transient:2", 20),
    ("art.docs", "agent.art-docs", "temporary:3", 20),
    ("art.orders", "agent.art-orders", "bug", 30),
    ("art.billing", "agent.art-billing", "bug", 10),
)
# Seed rows of the user's own (consumer_policies' columns): fuses too wide to trip here.
WIDE = ("agent.art-payments", "agent.art-orders")
RUN_SELECT = ["+poison_messages", "+dlq_messages", "+consumer_circuit_breakers",
              "+remediation_actions"]  # fmt: skip


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("artemis-oracle")
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(folder / "store"),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": os.environ.get("POISONWATCH_DRIVER_MEMORY", "2g"),
        "COLUMNS": "200",
    }
    for key in ("POISONWATCH_CRASH_AT", "POISONWATCH_PAUSE_AT"):
        env.pop(key, None)
    setting = AddressSetting(
        max_delivery_attempts=ATTEMPTS,
        redelivery_delay_ms=20,
        redelivery_multiplier=1.5,
        max_redelivery_delay_ms=300,
        auto_create_dead_letter_resources=False,
    )
    orders = AddressSetting(
        max_delivery_attempts=ORDERS_ATTEMPTS,
        redelivery_delay_ms=30,
        redelivery_multiplier=1.5,
        max_redelivery_delay_ms=300,
        auto_create_dead_letter_resources=False,
    )
    with started(folder / "artemis", default=setting, overrides={"art.orders": orders}) as b:
        yield {
            "broker": b,
            "env": env,
            "landing": folder / "landing",
            "classpath": java_kit.build(folder / "java-build"),
        }


def _browse(broker: Artemis, queue: str) -> list[dict[str, Any]]:
    client = JolokiaClient(parse_artemis_url(broker.url))
    found = [q for q in client.queues() if q.name == queue]
    return (
        [snapshot_row(broker.name, found[0], m, "", {}) for m in client.browse(found[0])]
        if found
        else []
    )


def _attempts(landing: Path) -> list[dict[str, Any]]:
    return [
        json.loads(ln)
        for f in sorted((landing / "jms_receive_attempts").glob("*.jsonl"))
        for ln in f.read_text(encoding="utf-8").splitlines()
    ]


def test_agents_collect_and_marts_agree_with_artemis_and_the_fuse(world: dict[str, Any]) -> None:
    broker, landing, cp = world["broker"], world["landing"], world["classpath"]
    for queue, _, _, n in AGENTS:
        broker.send(queue, [json.dumps({"queue": queue, "n": i}) for i in range(n)])
    runs = {}
    for queue, consumer, behaviour, _ in AGENTS:
        wide = {"max_failures": 3000} if consumer in WIDE else {}
        runs[consumer] = java_kit.agent(
            broker, cp, landing, queue, consumer, "node-1", behaviour, **wide
        )
        assert runs[consumer]["rc"] == 0, runs[consumer]
    kit_tripped = {c for c, r in runs.items() if r["tripped"]}
    assert kit_tripped == {"agent.art-billing"} and runs["agent.art-billing"]["disabled"]
    assert java_kit.board(broker) == {"agent.art-billing": {"node-1"}}

    # What Artemis did: orders all dead-lettered after six deliveries, billing left on its queue.
    dlq = _browse(broker, "DLQ")
    dlq_ids = sorted(str(r["message_id"]) for r in dlq)
    assert len(dlq_ids) == 30 and {r["orig_queue"] for r in dlq} == {"art.orders"}
    billing_ids = sorted(str(r["message_id"]) for r in _browse(broker, "art.billing"))
    assert len(billing_ids) == 10
    for queue in ("art.audit", "art.payments", "art.docs", "art.orders"):
        assert _browse(broker, queue) == [], queue
    deliveries = collections.defaultdict(list)
    for r in _attempts(landing):
        deliveries[(r["queue_name"], r["message_id"])].append(r["delivery_count"])
    for mid in dlq_ids:
        assert sorted(deliveries[("art.orders", mid)]) == list(range(1, ORDERS_ATTEMPTS + 1)), mid

    result = collect(parse_artemis_url(broker.url), ["art.*"], out=landing)
    assert result.error is None, result.error
    policies = ", ".join(
        [f"('{c}', 3000, 'ANY', null, 'oracle', null)" for c in WIDE]
        + ["('agent.art-billing', 10, 'ANY', null, 'oracle', 'pause_queue')"]
    )
    out = run_py(
        f"""
        import json
        from pathlib import Path
        from poisonwatch.ingest import ingest
        from poisonwatch.remediation import request_replay
        from poisonwatch.warehouse.dbtrun import run_dbt
        from poisonwatch.warehouse.engine import connect
        with connect("local") as e:
            s = ingest(e, Path({str(landing)!r}))
            assert not s.rejected_total, s
            run_dbt(["seed"])
            e.execute("insert into poisonwatch_policy.consumer_policies values {policies}")
            run_dbt(["run", "--select", *{RUN_SELECT!r}])
            q = lambda sql: [[None if v is None else str(v) for v in r] for r in e.query(sql)[1]]
            out = {{
                "poison": q("select queue_name, message_id, classification, failure_count, "
                            "failure_threshold from poisonwatch.poison_messages "
                            "where broker_kind = 'jms'"),
                "policies": q("select queue_name, policy_scope, max_delivery_attempts, "
                              "redelivery_delay_ms, redelivery_multiplier "
                              "from poisonwatch_intermediate.int_queue_policies "
                              "where broker_kind = 'jms'"),
                "dlq": q("select message_id, orig_queue, queue_name, is_in_dlq_snapshot "
                         "from poisonwatch.dlq_messages where broker_kind = 'jms'"),
                "breakers": q("select consumer_id, is_tripped, trip_reason, "
                              "longest_same_type_run from poisonwatch.consumer_circuit_breakers"),
                "consumer_actions": q("select action_type, consumer_id, broker_name, queue_name, "
                                      "status from poisonwatch.remediation_actions "
                                      "where action_type in ('disable_consumer', 'pause_queue')"),
            }}
        request_replay({dlq_ids!r}, {broker.name!r}, "DLQ", "oracle", target="local")
        with connect("local") as e:
            run_dbt(["run", "--select", "stg_ops__replay_requests+"])
            out["actions"] = [[str(v) for v in r] for r in e.query(
                "select action_type, message_id, queue_name, orig_queue, status "
                "from poisonwatch.remediation_actions where broker_kind = 'jms' "
                "and action_type = 'retry_from_dlq'")[1]]
        print("@@" + json.dumps(out))
        """,
        world["env"],
    )
    poison = {(r[0], r[1]): r for r in out["poison"]}
    in_dlq = {r[0]: r for r in out["dlq"] if r[3] == "True"}
    assert sorted(in_dlq) == dlq_ids
    assert {(r[1], r[2]) for r in in_dlq.values()} == {("art.orders", "DLQ")}
    for mid in dlq_ids:
        assert poison[("art.orders", mid)][2:] == ["poison", *[str(ORDERS_ATTEMPTS)] * 2], poison[
            ("art.orders", mid)
        ]
    # The policy in force is the broker's (no seed row for these queues).
    policies = {r[0]: r[1:] for r in out["policies"]}
    assert policies["art.orders"] == ["broker_settings", str(ORDERS_ATTEMPTS), "30", "1.5"]
    assert policies["art.payments"] == ["broker_settings", str(ATTEMPTS), "20", "1.5"]
    for queue in ("art.payments", "art.docs"):
        classes = {r[2] for (q, _), r in poison.items() if q == queue}
        assert classes == {"recovered"}, (queue, classes)
        assert len([k for k in poison if k[0] == queue]) == 20
    assert not [k for k in poison if k[0] == "art.audit"]
    breakers = {r[0]: r for r in out["breakers"]}
    marts_tripped = {c for c, r in breakers.items() if r[1] == "True"}
    assert marts_tripped == kit_tripped, breakers
    assert breakers["agent.art-billing"][2:] == ["same_exception_type", "3"]
    # The tripped breaker pauses the queue its agent reads, and disables nobody.
    assert out["consumer_actions"] == [
        ["pause_queue", "agent.art-billing", broker.name, "art.billing", "pending"]
    ]
    pending = sorted(r[1] for r in out["actions"] if r[4] == "pending")
    assert pending == dlq_ids and {(r[2], r[3]) for r in out["actions"]} == {("DLQ", "art.orders")}
    world["dlq_ids"] = dlq_ids


def test_apply_retries_the_dlq_group_on_artemis_and_the_fixed_agent_consumes_it(
    world: dict[str, Any],
) -> None:
    if "dlq_ids" not in world:
        pytest.fail("the scenario of the previous test did not finish: nothing to retry")
    broker, landing = world["broker"], world["landing"]
    proc = subprocess.run(
        [str(BIN), "apply", "--yes", "--broker", broker.url],
        env=world["env"], cwd=ROOT, capture_output=True, text=True, timeout=1200, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert _browse(broker, "DLQ") == []
    back = sorted(str(r["message_id"]) for r in _browse(broker, "art.orders"))
    assert back == world["dlq_ids"]  # each exactly once: the journal's markers did their work
    fixed = java_kit.agent(
        broker, world["classpath"], landing, "art.orders", "agent.art-orders", "node-1", "healthy"
    )
    assert fixed["rc"] == 0 and fixed["attempts"] == len(back), fixed
    assert _browse(broker, "art.orders") == []
    acked = [
        r["message_id"]
        for r in _attempts(landing)
        if r["queue_name"] == "art.orders" and r["outcome"] == "acknowledged"
    ]
    assert sorted(acked) == world["dlq_ids"]

    # The same apply paused art.billing: its messages wait there, none delivered, until resume.
    acts = ArtemisActions(parse_artemis_url(broker.url))
    assert acts.is_paused("art.billing") is True
    billing = sorted(str(r["body"]) for r in _browse(broker, "art.billing"))
    assert len(billing) == 10 and broker.receive("art.billing", 1, 2.0) == []
    # Apply paused it live: without a connection to that broker resume refuses to only record.
    proc = subprocess.run(
        [str(BIN), "resume", "--queue", "art.billing"],
        env=world["env"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and "--by-hand" in proc.stderr, proc.stdout + proc.stderr
    assert acts.is_paused("art.billing") is True
    proc = subprocess.run(
        [str(BIN), "resume", "--queue", "art.billing", "--broker", broker.url, "--note", "fixed"],
        env=world["env"], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0 and "resumed" in proc.stdout, proc.stdout + proc.stderr
    assert acts.is_paused("art.billing") is False
    assert sorted(broker.receive("art.billing", 10, 60.0)) == billing
    # After the resume, the agent fails three times more with its bug (N = 3): a new pause.
    failed = next(
        r for r in _attempts(landing)
        if r["consumer_id"] == "agent.art-billing" and r["outcome"] == "rolled_back"
    )  # fmt: skip
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=5)
    (landing / "jms_receive_attempts" / "after-resume.jsonl").write_text(
        "".join(
            json.dumps({**failed, "activation_id": "after-resume",
                        "attempted_at": (later + dt.timedelta(seconds=i)).isoformat()}) + "\n"
            for i in range(3)
        )
    )  # fmt: skip
    out = run_py(
        f"""
        import json
        from pathlib import Path
        from poisonwatch.ingest import ingest
        from poisonwatch.warehouse.dbtrun import run_dbt
        from poisonwatch.warehouse.engine import connect
        with connect("local") as e:
            q = lambda sql: [[str(v) for v in r] for r in e.query(sql)[1]]
            pauses = ("select action_id, status from poisonwatch.remediation_actions "
                      "where action_type = 'pause_queue' and queue_name = 'art.billing'")
            run_dbt(["run", "--select", "stg_ops__paused_queues", "stg_ops__resume_requests",
                     "consumer_circuit_breakers", "int_remediation_actions__consumer_commands",
                     "remediation_actions"])
            out = {{
                "paused": q("select consumer_id, queue_name "
                            "from poisonwatch_staging.stg_ops__paused_queues"),
                "resumed": q("select queue_name, is_resumed_on_broker, note "
                             "from poisonwatch_staging.stg_ops__resume_requests"),
                "is_paused": q("select is_paused_by_apply from "
                               "poisonwatch.consumer_circuit_breakers "
                               "where consumer_id = 'agent.art-billing'"),
                "after_resume": q(pauses),
            }}
            s = ingest(e, Path({str(landing)!r}))
            assert not s.rejected_total, s
            # The pause family reads the attempts' staging view: the new failures are in it.
            run_dbt(["run", "--select", "int_remediation_actions__consumer_commands",
                     "remediation_actions"])
            out["after_failures"] = q(pauses)
        print("@@" + json.dumps(out))
        """,
        world["env"],
    )
    assert out["paused"] == [["agent.art-billing", "art.billing"]]
    assert out["resumed"] == [["art.billing", "True", "fixed"]]
    assert out["is_paused"] == [["False"]]
    assert out["after_resume"] == [], out["after_resume"]
    assert [r[1] for r in out["after_failures"]] == ["pending"], out["after_failures"]
