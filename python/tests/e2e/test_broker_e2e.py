"""End to end on one real ActiveMQ Classic broker: real consumers wrapped by the kit
until the broker dead-letters, `collect`, ingest, dbt seed + run of the marts checked here and
what they are built from (the other models and the data tests run in scripts/test.sh's build on
generated data: not the subject here), the marts against the broker's own DLQ, then
`poisonwatch apply` of retry_from_dlq, dead_letter and park actions on the broker killed three
times (kill -9 in the middle of the broker phase, a broker crash and restart in the middle,
kill -9 between the broker step and the ledger write), re-run, and the broker's queues checked
message by message: every message exactly once in the right place. Then the next applies, with
nothing left to plan, send the parked messages back to the queue their ledger rows name, once.

Queues (broker redelivery 1.1 s; ActiveMQ's default dead-letter strategy per queue `DLQ.<q>`):
- e2e.audit    30 messages, a healthy consumer: acknowledged, never in poison_messages;
- e2e.payments 30 messages, a transient consumer (TemporarilyUnavailable twice, then fine):
  recovered;
- e2e.orders  150 messages, a consumer with a permanent bug; the broker dead-letters each after
  4 deliveries (maximumRedeliveries 3) → `poisonwatch replay` → retry_from_dlq actions;
- e2e.billing  60 messages, the same bug, but this queue's broker policy allows 20 deliveries:
  the consumer is stopped after 10, the messages stay on the queue and the marts classify them
  poison (max_deliveries 10) → dead_letter actions;
- e2e.parking   5 messages with a property and a JMS type, like billing, but a policy row of its
  own says `park` with no delay → park actions: apply moves them to e2e.parking.parked, and the
  following apply sends them back to e2e.parking.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.activemq import ActiveMQ, ensure_activemq, started
from support.child_python import run_py

from poisonwatch.broker.actions import ACTION_PROPERTY, JOURNAL_QUEUE, SOURCE_ID_PROPERTY
from poisonwatch.broker.client import StompClient
from poisonwatch.broker.collect import collect
from poisonwatch.broker.kit import AttemptRecorder, TemporarilyUnavailable, consume
from poisonwatch.broker.profiles import parse_broker_url

_why = ensure_activemq()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(_why is not None, reason=_why or "")]

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"
N_AUDIT, N_PAYMENTS, N_ORDERS, N_BILLING, N_PARKING = 30, 30, 150, 60, 5
# The marts checked here and read by `apply`, with what they are built from (the alert models
# and the on-demand backtests are not the subject: scripts/test.sh's demo builds every model).
RUN_SELECT = ["+poison_messages", "+dlq_messages", "+remediation_actions"]
BILLING_DELIVERIES = 10
# The park policy of e2e.parking, in the seed table's column order (seeds/failure_policies.csv):
# the jms_default row's numbers with action `park`, due at once so that the next apply releases.
PARK_POLICY = (
    "'e2e_parking', 'jms', 'e2e.parking', null, 10, null, false, 'park', null, null, "
    "1000, 2.0, 60000, 0"
)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    folder = tmp_path_factory.mktemp("broker-e2e")
    redeliveries = {"e2e.billing": 20, "e2e.parking": 20}
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(folder / "store"),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": os.environ.get("POISONWATCH_DRIVER_MEMORY", "2g"),
        "COLUMNS": "200",
    }
    for key in ("POISONWATCH_CRASH_AT", "POISONWATCH_PAUSE_AT"):
        env.pop(key, None)
    with started(folder / "activemq", max_redeliveries=3, queue_redeliveries=redeliveries) as b:
        yield {"broker": b, "env": env, "landing": folder / "landing", "folder": folder}


def browse(broker: ActiveMQ, queue: str) -> list[Any]:
    with StompClient(parse_broker_url(broker.url)) as c:
        return list(c.browse(queue))


def _wait(what: str, cond: Any, timeout: float = 120, progress: Any = None) -> None:
    """Wait for `cond`. With `progress`, fail only after `timeout` seconds in which its value
    did not change: a loaded machine slows the broker's redeliveries, a hung one stops them."""
    last = progress() if progress else None
    deadline = time.monotonic() + timeout
    while not cond():
        if progress and (now := progress()) != last:
            last, deadline = now, time.monotonic() + timeout
        assert time.monotonic() < deadline, (
            f"timed out waiting for {what}: nothing changed in {timeout:.0f} s (at {last})"
        )
        time.sleep(0.5)


def test_consumers_collect_and_marts_agree_with_the_broker(world: dict[str, Any]) -> None:
    broker, landing = world["broker"], world["landing"]
    target = parse_broker_url(broker.url)
    with StompClient(target) as c:
        for queue, n in (
            ("e2e.audit", N_AUDIT),
            ("e2e.payments", N_PAYMENTS),
            ("e2e.orders", N_ORDERS),
            ("e2e.billing", N_BILLING),
        ):
            for i in range(n):
                c.send(queue, f'{{"queue": "{queue}", "n": {i}}}'.encode(), {"persistent": "true"})
        for i in range(N_PARKING):
            c.send(
                "e2e.parking",
                f"park me {i}".encode(),
                {"persistent": "true", "type": "ParkMe", "tenant": f"t-{i}"},
            )
        c.sync()

    seen: collections.Counter[str] = collections.Counter()

    def healthy(frame: Any) -> None:
        return None

    def transient(frame: Any) -> None:
        seen[frame.headers["message-id"]] += 1
        if seen[frame.headers["message-id"]] <= 2:
            raise TemporarilyUnavailable("document not replicated to this server yet")

    def bug(frame: Any) -> None:
        raise ValueError("order total is negative")  # a permanent bug: fails every time

    stops: dict[str, threading.Event] = {}
    threads, recorders = [], {}
    for queue, handler, consumer in (
        ("e2e.audit", healthy, "agent.audit"),
        ("e2e.payments", transient, "agent.payments"),
        ("e2e.orders", bug, "agent.orders"),
        ("e2e.billing", bug, "agent.billing"),
        ("e2e.parking", bug, "agent.parking"),
    ):
        rec = AttemptRecorder(landing, target.name, consumer, server_name="node-1")
        recorders[queue] = rec
        stop = threading.Event()
        t = threading.Thread(
            target=consume, args=(target, queue, handler, rec, stop), kwargs={"prefetch": 20}
        )
        t.start()
        stops[queue] = stop
        threads.append(t)

    def deliveries() -> int:
        return sum(sum(r._seen.values()) for r in recorders.values())

    try:
        _wait(
            "orders dead-lettered",
            lambda: len(browse(broker, "DLQ.e2e.orders")) == N_ORDERS,
            progress=deliveries,
        )
        # billing and parking: stopped once every message was delivered 10 times
        for queue, n in (("e2e.billing", N_BILLING), ("e2e.parking", N_PARKING)):
            rec = recorders[queue]
            _wait(
                f"{queue} delivered 10 times each",
                lambda rec=rec, n=n: (
                    len(rec._seen) == n and min(rec._seen.values()) >= BILLING_DELIVERIES
                ),
                progress=deliveries,
            )
            stops[queue].set()
        _wait("audit done", lambda: not browse(broker, "e2e.audit"), progress=deliveries)
        _wait("payments done", lambda: not browse(broker, "e2e.payments"), progress=deliveries)
    finally:
        for s in stops.values():
            s.set()
        for t in threads:
            t.join(30)
    # billing's pending redeliveries come back to the queue: 60 messages, none dead-lettered
    _wait("billing back on its queue", lambda: len(browse(broker, "e2e.billing")) == N_BILLING)
    _wait("parking back on its queue", lambda: len(browse(broker, "e2e.parking")) == N_PARKING)
    assert not browse(broker, "DLQ.e2e.billing")
    assert not browse(broker, "DLQ.e2e.parking")

    result = collect(target, ["e2e.*"], out=landing)
    assert result.error is None
    assert result.per_queue["DLQ.e2e.orders"] == N_ORDERS
    assert result.per_queue["e2e.billing"] == N_BILLING
    assert result.per_queue["e2e.parking"] == N_PARKING
    dlq_ids = sorted(m.message_id for m in browse(broker, "DLQ.e2e.orders"))
    billing_ids = sorted(m.message_id for m in browse(broker, "e2e.billing"))
    parking = {m.message_id: m for m in browse(broker, "e2e.parking")}
    world.update(
        dlq_ids=dlq_ids,
        billing_ids=billing_ids,
        parking={i: (m.body, m.properties["tenant"]) for i, m in parking.items()},
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
            # A queue policy of the user's own, as a row of the seed they edit would give it.
            e.execute("insert into poisonwatch_policy.failure_policies values ({PARK_POLICY})")
            run_dbt(["run", "--select", *{RUN_SELECT!r}])
            q = lambda sql: [[None if v is None else str(v) for v in r] for r in e.query(sql)[1]]
            out = {{
                "poison": q("select queue_name, message_id, classification, failure_count, "
                            "last_error_key from poisonwatch.poison_messages "
                            "where broker_kind = 'jms'"),
                "dlq": q("select message_id, orig_queue, queue_name, is_in_dlq_snapshot "
                         "from poisonwatch.dlq_messages where broker_kind = 'jms'"),
            }}
        request_replay({dlq_ids!r}, {target.name!r}, "DLQ.e2e.orders", "e2e", target="local")
        with connect("local") as e:
            # What the replay request reaches (its ledger's view, the JMS action family,
            # the mart): the family is a table, so naming the mart alone would not see it.
            run_dbt(["run", "--select", "stg_ops__replay_requests+"])
            out["actions"] = [[str(v) for v in r] for r in e.query(
                "select action_type, message_id, queue_name, orig_queue, status, action_id "
                "from poisonwatch.remediation_actions where broker_kind = 'jms' "
                "and action_type in ('retry_from_dlq', 'dead_letter', 'park')")[1]]
        print("@@" + json.dumps(out))
        """,
        world["env"],
    )
    poison = {(r[0], r[1]): r for r in out["poison"]}
    # the broker's DLQ and the marts agree message by message
    dlq = {r[0]: r for r in out["dlq"] if r[3] == "True"}
    assert sorted(dlq) == dlq_ids
    assert {(r[1], r[2]) for r in dlq.values()} == {("e2e.orders", "DLQ.e2e.orders")}
    for mid in dlq_ids:
        row = poison[("e2e.orders", mid)]
        assert row[3] == "4" and "ValueError" in str(row[4]), row
    for mid in billing_ids:
        assert poison[("e2e.billing", mid)][2] == "poison"
    for mid in parking:
        assert poison[("e2e.parking", mid)][2] == "poison"
    assert {r[2] for (q, _), r in poison.items() if q == "e2e.payments"} == {"recovered"}
    assert len([k for k in poison if k[0] == "e2e.payments"]) == N_PAYMENTS
    assert not [k for k in poison if k[0] == "e2e.audit"]
    pending = [r for r in out["actions"] if r[4] == "pending"]
    assert sorted(r[1] for r in pending if r[0] == "retry_from_dlq") == dlq_ids
    assert sorted(r[1] for r in pending if r[0] == "dead_letter") == billing_ids
    parks = [r for r in pending if r[0] == "park"]
    assert sorted(r[1] for r in parks) == sorted(parking)
    assert {r[2] for r in parks} == {"e2e.parking"}
    world["planned"] = sorted(r[5] for r in pending)


def _apply(world: dict[str, Any], extra: dict[str, str] | None = None) -> subprocess.Popen:
    env = {**world["env"], **(extra or {})}
    return subprocess.Popen(
        [str(BIN), "apply", "--yes", "--broker", world["broker"].url],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _moved(broker: ActiveMQ) -> int:
    return len(browse(broker, JOURNAL_QUEUE))


def test_apply_on_the_broker_exactly_once_under_kills(world: dict[str, Any]) -> None:
    if "planned" not in world:
        pytest.fail("the scenario of the previous test did not finish: nothing to apply")
    broker: ActiveMQ = world["broker"]
    planned = world["planned"]
    total = len(planned)
    assert total >= 200

    # 1. kill -9 in the middle of the broker phase
    proc = _apply(world, {"POISONWATCH_CRASH_AT": "during:broker", "POISONWATCH_CRASH_DELAY": "1"})
    log, _ = proc.communicate(timeout=1200)
    assert proc.returncode == -signal.SIGKILL, log[-3000:]
    first = _moved(broker)
    assert 0 < first <= total, first

    # 2. the broker crashes (SIGKILL) and restarts while apply runs
    proc = _apply(world)
    _wait("apply moving messages again", lambda: _moved(broker) >= first + 20, timeout=600)
    broker.restart(kill=True)
    log, _ = proc.communicate(timeout=1200)
    assert proc.returncode == 2 and "stopped: lost the connection" in log, log[-3000:]

    # 3. kill -9 after the broker step, before the ledger write
    proc = _apply(world, {"POISONWATCH_CRASH_AT": "before_commit"})
    log, _ = proc.communicate(timeout=1200)
    assert proc.returncode == -signal.SIGKILL, log[-3000:]

    # the re-run settles every action from the broker's journal, moves nothing twice; then two
    # more applies with nothing left to plan: the first sends the parked messages back, the
    # second finds nothing to send (in one child process that also reads the ledger and the
    # broker between the runs, with the same Spark session: one JVM)
    out = run_py(
        f"""
        import json
        from poisonwatch.broker.client import StompClient
        from poisonwatch.broker.profiles import parse_broker_url
        from poisonwatch.remediation import Filters, run_apply
        from poisonwatch.warehouse.engine import connect

        def queues():
            with StompClient(parse_broker_url({broker.url!r})) as c:
                return {{q: [[m.body.decode(), m.headers.get("type"), m.properties]
                            for m in c.browse(q)]
                        for q in ("e2e.parking", "e2e.parking.parked", "DLQ.e2e.parking")}}

        result = run_apply(Filters(), yes=True, target="local", brokers=[{broker.url!r}])
        with connect("local") as e:
            rows = e.query("select action_id, count(*), max(outcome) "
                           "from poisonwatch_ops.action_log group by action_id")[1]
            parked_rows = e.query("select message_id, queue_name, holding_queue, body "
                                  "from poisonwatch_ops.parked_messages")[1]
        out = {{"broker": dict(result.broker), "log": [[str(v) for v in r] for r in rows],
                "parked_rows": [[str(v) for v in r] for r in parked_rows],
                "after_park": queues(), "released": []}}
        for _ in range(2):
            again = run_apply(Filters(), yes=True, target="local", brokers=[{broker.url!r}])
            out["released"].append([again.released, dict(again.applied)])
            out.setdefault("after_release", []).append(queues())
        print("@@" + json.dumps(out))
        """,
        world["env"],
    )
    assert out["broker"].get("already_applied", 0) > 0  # settled from the journal
    assert not out["broker"].get("failed")
    # the broker, message by message
    dlq_ids, billing_ids = world["dlq_ids"], world["billing_ids"]
    assert not browse(broker, "DLQ.e2e.orders")
    assert not browse(broker, "e2e.billing")
    orders = [m.properties[SOURCE_ID_PROPERTY] for m in browse(broker, "e2e.orders")]
    billing_dlq = browse(broker, "DLQ.e2e.billing")
    assert sorted(orders) == dlq_ids  # each retried exactly once: no duplicate, no loss
    assert sorted(m.properties[SOURCE_ID_PROPERTY] for m in billing_dlq) == billing_ids
    assert all(m.original_queue == "e2e.billing" for m in billing_dlq)
    assert len({m.properties[ACTION_PROPERTY] for m in billing_dlq}) == N_BILLING
    assert _moved(broker) == 0  # journal markers pruned once the ledger has them

    # one ledger row per action; the live ones say so (other actions of the run, e.g. a
    # disable_consumer for the buggy agents, are recorded for their command file)
    log = {r[0]: r for r in out["log"]}
    assert {r[1] for r in log.values()} == {"1"}
    assert sorted(i for i, r in log.items() if r[2] == "applied_on_broker") == planned

    # park: gone from its queue, in the holding queue with its body, type and properties, and
    # the ledger names the queue it goes back to
    parking: dict[str, tuple[str, str]] = world["parking"]
    want = sorted((body.decode(), tenant) for body, tenant in parking.values())
    parked = out["after_park"]
    assert parked["e2e.parking"] == [] and parked["DLQ.e2e.parking"] == []
    held = parked["e2e.parking.parked"]
    assert sorted((body, props["tenant"]) for body, _, props in held) == want
    assert {kind for _, kind, _ in held} == {"ParkMe"}
    assert sorted(props[SOURCE_ID_PROPERTY] for _, _, props in held) == sorted(parking)
    assert {props["poisonwatch_park_queue"] for _, _, props in held} == {"e2e.parking"}
    assert sorted(r[0] for r in out["parked_rows"]) == sorted(parking)
    assert {(r[1], r[2]) for r in out["parked_rows"]} == {("e2e.parking", "e2e.parking.parked")}
    assert sorted(r[3] for r in out["parked_rows"]) == sorted(b for b, _ in want)
    # release: the next apply (nothing planned) sends each back to e2e.parking, once; the one
    # after it sends nothing again
    (released, applied), (released_again, applied_again) = out["released"]
    assert released == ["e2e.parking"] * N_PARKING and applied == {}
    assert released_again == [] and applied_again == {}
    for queues in out["after_release"]:
        assert queues["e2e.parking.parked"] == [] and queues["DLQ.e2e.parking"] == []
        back = queues["e2e.parking"]
        assert sorted((body, props["tenant"]) for body, _, props in back) == want
        assert {kind for _, kind, _ in back} == {"ParkMe"}
        assert sorted(props[SOURCE_ID_PROPERTY] for _, _, props in back) == sorted(parking)
