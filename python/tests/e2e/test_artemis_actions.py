"""Remediation actions on one real ActiveMQ Artemis broker (module-scoped, started and stopped by
PID), through its management API: each action type puts the message where it belongs, a re-run
after a lost ledger write finds its intent and moves nothing twice, a paused queue holds its
messages until resumed (once under a kill, through a broker crash), a message in delivery is
busy, a hostile name or id is refused before anything moves, and 300 actions survive kill -9 of
the runner at three points and a broker crash mid-run with every message exactly once where it
belongs, checked message by message on the broker.

The runner here is `poisonwatch apply`'s live half (`LiveRunner`) driven in apply's order
(broker step, ledger write, marker removal) by a child process with a JSON-lines ledger: the
subject is the broker protocol, not the Spark ledger (that one's kill tests are
test_remediation_apply.py and, on ActiveMQ Classic, test_broker_e2e.py).
"""

from __future__ import annotations

import collections
import dataclasses
import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
import stomp
from support.artemis import AddressSetting, Artemis, broker_fixture, ensure_artemis
from support.child_python import with_tests_on_path

from poisonwatch.broker.actions import JOURNAL_QUEUE, LiveAction, ParkRecord
from poisonwatch.broker.artemis import snapshot_row
from poisonwatch.broker.artemis_actions import ArtemisActions
from poisonwatch.broker.client import StompClient
from poisonwatch.broker.profiles import parse_artemis_url, parse_broker_url

_why = ensure_artemis()
pytestmark = pytest.mark.skipif(_why is not None, reason=_why or "")

ROOT = Path(__file__).resolve().parents[3]
# Artemis' own default: one dead-letter queue, DLQ, for every address (with auto-created
# dead-letter resources a message dead-lettered by management lands in DLQ and DLQ.<address>).
broker = broker_fixture(default=AddressSetting(auto_create_dead_letter_resources=False))


def _actions(broker: Artemis) -> ArtemisActions:
    return ArtemisActions(parse_artemis_url(broker.url))


def _put_stomp(broker: Artemis, queue: str, bodies: list[str]) -> None:
    """Send over STOMP: no JMSMessageID, only the broker's own message id."""
    with StompClient(parse_broker_url(broker.stomp_url)).connect() as client:
        for body in bodies:
            client.send(queue, body.encode(), {"persistent": "true", "kind": "stomp"})
        client.sync()


def _rows(acts: ArtemisActions, queue: str) -> list[dict[str, Any]]:
    """The queue's messages as `collect` lands them (message_id, body, orig_queue, ...)."""
    acts._queues.clear()
    q = acts.queue(queue)
    if q is None:
        return []
    return [snapshot_row("b", q, m, "", {}) for m in acts.client.browse(q)]


def _ids(acts: ArtemisActions, queue: str) -> dict[str, str]:
    """body -> message_id in `queue`."""
    return {str(r["body"]): str(r["message_id"]) for r in _rows(acts, queue)}


def _all_ids(acts: ArtemisActions, queue: str, bodies: list[str]) -> dict[str, str]:
    """`_ids` once the queue shows every one of `bodies`: a browse right after a send or a
    move can miss the last messages on a loaded machine. Fails after 60 s naming what is
    missing."""
    deadline = time.monotonic() + 60
    while True:
        ids = _ids(acts, queue)
        missing = sorted(set(bodies) - set(ids))
        if not missing:
            return ids
        assert time.monotonic() < deadline, f"{queue} never showed {missing[:5]}"
        time.sleep(0.5)


def _where(acts: ArtemisActions) -> dict[str, list[str]]:
    """body -> the queues holding a copy of it (every queue but Artemis' own)."""
    acts._queues.clear()
    out: dict[str, list[str]] = collections.defaultdict(list)
    for q in acts.client.queues():
        if q.name.startswith(("$sys.", "activemq.")) or q.name == JOURNAL_QUEUE:
            continue
        for r in _rows(acts, q.name):
            out[str(r["body"])].append(q.name)
    return out


def _action(action_id: str, action_type: str, queue: str, message_id: str, **kw: Any) -> LiveAction:
    return LiveAction(action_id, action_type, "b", queue, message_id, **kw)


def _dead_letter_queues(acts: ArtemisActions) -> set[str]:
    """The queues of the dead-letter address (`DLQ`, and those Artemis auto-creates on it)."""
    acts._queues.clear()
    return {q.name for q in acts.client.queues() if q.address == "DLQ"}


def _dead_lettered(where: dict[str, list[str]], body: str, dlqs: set[str]) -> bool:
    """Whether the broker holds `body` only on its dead-letter address, once per queue."""
    copies = where.get(body, [])
    return bool(copies) and set(copies) <= dlqs and len(copies) == len(set(copies))


def test_each_action_puts_the_message_where_it_belongs_once(broker: Artemis) -> None:
    acts = _actions(broker)
    broker.send("act.orders", ["j-dead", "j-park", "j-gone", "j-stay"])
    _put_stomp(broker, "act.orders", ["s-dead", "s-park", "s-gone"])
    ids = _all_ids(
        acts, "act.orders", ["j-dead", "j-park", "j-gone", "j-stay", "s-dead", "s-park", "s-gone"]
    )
    assert ids["j-dead"].startswith("ID:") and ids["s-dead"].isdigit()
    first = [
        _action("a1", "dead_letter", "act.orders", ids["j-dead"]),
        _action("a2", "dead_letter", "act.orders", ids["s-dead"]),
        _action("a3", "park", "act.orders", ids["j-park"], park_delay_minutes=0),
        _action("a4", "park", "act.orders", ids["s-park"], park_delay_minutes=0),
        _action("a5", "discard", "act.orders", ids["j-gone"]),
        _action("a6", "discard", "act.orders", ids["s-gone"]),
    ]
    outcomes = [acts.execute(a) for a in first]
    assert [o.status for o in outcomes] == ["applied"] * 6, [o.detail for o in outcomes]
    assert outcomes[0].target_queue == "DLQ" and outcomes[2].target_queue == "act.orders.parked"
    where, dlqs = _where(acts), _dead_letter_queues(acts)
    assert _dead_lettered(where, "j-dead", dlqs) and _dead_lettered(where, "s-dead", dlqs)
    dlq = where["j-dead"][0]
    assert where["j-park"] == where["s-park"] == ["act.orders.parked"]
    assert "j-gone" not in where and "s-gone" not in where
    assert where["j-stay"] == ["act.orders"]
    # The ledger write was lost: the re-run finds every intent and moves nothing again.
    again = [acts.execute(a) for a in first]
    assert [o.status for o in again] == ["already_applied"] * 6
    assert _where(acts) == where
    assert acts.prune({a.action_id for a in first}) == 6
    assert acts.journal_ids() == []

    # Seed 002's group operation: back to the original subscription's queue, by id in the DLQ.
    in_dlq = _all_ids(acts, dlq, ["j-dead", "s-dead"])
    retries = [
        _action(f"r-{b}", "retry_from_dlq", dlq, in_dlq[b], orig_queue="act.orders")
        for b in ("j-dead", "s-dead")
    ]
    assert [acts.execute(a).status for a in retries] == ["applied"] * 2
    assert [acts.execute(a).status for a in retries] == ["already_applied"] * 2
    assert acts.prune({a.action_id for a in retries}) == 2
    where = _where(acts)
    assert where["j-dead"] == where["s-dead"] == ["act.orders"]

    # Parked messages go back where the ledger says, once.
    records = [
        ParkRecord(a.action_id, "act.orders", "act.orders.parked", "2000-01-01T00:00:00.000000Z",
                   a.message_id)
        for a in first[2:4]
    ]  # fmt: skip
    assert acts.release_parked(records).released == ["act.orders", "act.orders"]
    assert acts.release_parked(records).released == []
    where = _where(acts)
    assert {b: q for b, q in where.items() if b.startswith(("j-", "s-"))} == {
        b: ["act.orders"] for b in ("j-dead", "s-dead", "j-park", "s-park", "j-stay")
    }


def test_a_message_in_delivery_is_busy_until_the_consumer_lets_go(broker: Artemis) -> None:
    acts = _actions(broker)
    broker.send("act.busy", ["held"])
    message_id = _all_ids(acts, "act.busy", ["held"])["held"]
    got: list[Any] = []

    class Hold(stomp.ConnectionListener):
        def on_message(self, frame: Any) -> None:
            got.append(frame)

    conn = stomp.Connection([("127.0.0.1", broker.port)])
    conn.set_listener("hold", Hold())
    conn.connect(broker.user, broker.password, wait=True)
    conn.subscribe("/queue/act.busy", id="1", ack="client-individual")
    deadline = time.monotonic() + 30
    while not got and time.monotonic() < deadline:
        time.sleep(0.1)
    assert got, "the consumer got nothing"
    action = _action("busy-1", "dead_letter", "act.busy", message_id)
    outcome = acts.execute(action)
    assert outcome.status == "busy", outcome.detail
    assert "busy-1" not in acts.journal_ids()
    conn.disconnect()  # unacknowledged: the broker takes it back
    deadline = time.monotonic() + 30
    while "held" not in _ids(acts, "act.busy") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert acts.execute(action).status == "applied"
    assert acts.prune({"busy-1"}) == 1
    assert _dead_lettered(_where(acts), "held", _dead_letter_queues(acts))


@pytest.mark.parametrize(
    ("action", "why"),
    [
        (_action("x1", "discard", "act.a,act.b", "ID:1"), "would not name exactly one queue"),
        (_action("x2", "discard", JOURNAL_QUEUE, "ID:1"), "poisonwatch's own journal"),
        (_action("x3", "discard", "act.refuse", "ID:1\n' or 1=1"), "control characters"),
        (_action("x4", "retry_from_dlq", "DLQ", "ID:1"), "no original queue"),
        (_action("x5", "retry_from_dlq", "DLQ", "ID:1", orig_queue="q>"), "exactly one queue"),
        (_action("x6", "pause", "act.refuse", "ID:1"), "not a live broker action type"),
    ],
)
def test_a_hostile_action_is_refused_before_anything_moves(
    broker: Artemis, action: LiveAction, why: str
) -> None:
    acts = _actions(broker)
    broker.send("act.refuse", ["keep"])
    before = _where(acts)
    outcome = acts.execute(action)
    assert outcome.status == "failed" and why in outcome.detail
    assert _where(acts) == before
    assert action.action_id not in acts.journal_ids()


def test_pause_once_under_a_kill_holds_through_a_restart_and_resume_lets_go(
    broker: Artemis, tmp_path: Path
) -> None:
    """pause_queue (a tripped breaker whose platform cannot be reached): the runner killed
    right after the pause and before its ledger write, the re-run records it once as
    already_applied; the paused queue keeps its messages, delivers none, stays paused through
    a broker crash; resume lets the consumer have them all."""
    acts = _actions(broker)
    bodies = ["p-1", "p-2", "p-3"]
    broker.send("act.pause", bodies)
    _all_ids(acts, "act.pause", bodies)
    plan = [LiveAction("pz-1", "pause_queue", broker.name, "act.pause", "")]
    (tmp_path / "plan.json").write_text(json.dumps([dataclasses.asdict(a) for a in plan]))
    proc = _child(broker, tmp_path, "artemis:after_pause")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == -9, f"{proc.returncode}\n{out}\n{err}"
    assert acts.is_paused("act.pause") is True and _ledger(tmp_path) == []
    proc = _child(broker, tmp_path)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    assert [(r["action_id"], r["status"]) for r in _ledger(tmp_path)] == [
        ("pz-1", "already_applied")
    ]
    assert broker.receive("act.pause", 1, 3.0) == []
    broker.stop(kill=True)
    broker.start()
    acts = _actions(broker)
    assert acts.is_paused("act.pause") is True
    assert sorted(_all_ids(acts, "act.pause", bodies)) == bodies
    assert acts.resume_queue("act.pause") is True
    assert sorted(broker.receive("act.pause", 3, 60.0)) == bodies
    assert acts.resume_queue("act.pause") is False
    assert acts.execute(_action("pz-2", "pause_queue", "act.none", "")).status == "failed"


# --- exactly once under kills ---------------------------------------------------------------

N_QUEUE, N_RETRY, BATCH = 240, 60, 20
# The child: apply's live half in apply's order, with a JSON-lines ledger (one line per action,
# written after the broker steps of its batch; markers removed after the ledger write).
CHILD = """
import json, os, sys
from pathlib import Path
from poisonwatch.broker.actions import LiveAction
from poisonwatch.broker.client import BrokerGoneError
from poisonwatch.broker.live import LiveRunner
from poisonwatch.broker.profiles import parse_artemis_url
from poisonwatch.config import crash_point
from poisonwatch.remediation.ledger import crash_during

url, plan_file, ledger_file = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
batch = int(sys.argv[4])
target = parse_artemis_url(url)
plan = json.loads(plan_file.read_text())
done = {json.loads(ln)["action_id"] for ln in ledger_file.read_text().splitlines()} \\
    if ledger_file.exists() else set()
runner = LiveRunner({target.name: target})
runner.prepare({target.name}, lambda ids: set(ids) & done)
todo = [a for a in plan if a["action_id"] not in done]
try:
    for start in range(0, len(todo), batch):
        rows = todo[start:start + batch]
        crash_point("before_broker")
        with crash_during("broker"):
            outcomes = [runner.run(a) for a in rows]
        crash_point("after_broker")
        settled = [o for o in outcomes if o.status != "busy"]
        with ledger_file.open("a") as fh:
            for o in settled:
                fh.write(json.dumps({"action_id": o.action.action_id, "status": o.status,
                                     "detail": o.detail}) + "\\n")
            fh.flush()
            os.fsync(fh.fileno())
        crash_point("after_commit")
        runner.forget(target.name, {o.action.action_id for o in settled})
except BrokerGoneError as exc:
    print(f"stopped: {exc}", file=sys.stderr)
    sys.exit(3)
print("@@" + json.dumps({"ran": len(todo)}))
"""


def _child(broker: Artemis, tmp: Path, crash_at: str | None = None, **env: str) -> Any:
    full = with_tests_on_path({"PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"})
    if crash_at:
        full["POISONWATCH_CRASH_AT"] = crash_at
    full.update(env)
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(CHILD), broker.url, str(tmp / "plan.json"),
         str(tmp / "ledger.jsonl"), str(BATCH)],
        cwd=ROOT, env=full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _ledger(tmp: Path) -> list[dict[str, Any]]:
    path = tmp / "ledger.jsonl"
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


def test_300_actions_exactly_once_under_kills_and_a_broker_crash(
    broker: Artemis, tmp_path: Path
) -> None:
    acts = _actions(broker)
    kinds = ["dead_letter", "park", "discard"]
    bodies = [f"k-{i:03d}" for i in range(N_QUEUE)]
    broker.send("kill.q", bodies[: N_QUEUE // 2])
    _put_stomp(broker, "kill.q", bodies[N_QUEUE // 2 :])
    retry_bodies = [f"r-{i:03d}" for i in range(N_RETRY)]
    broker.send("kill.r", retry_bodies)
    for body, message_id in _all_ids(acts, "kill.r", retry_bodies).items():
        assert acts.execute(_action(f"pre-{body}", "dead_letter", "kill.r", message_id)).done
    acts.prune({f"pre-{b}" for b in retry_bodies})
    dlq = _where(acts)[retry_bodies[0]][0]
    ids, in_dlq = _all_ids(acts, "kill.q", bodies), _all_ids(acts, dlq, retry_bodies)
    plan = [
        LiveAction(f"q{i:03d}", kinds[i % 3], broker.name, "kill.q", ids[body])
        for i, body in enumerate(bodies)
    ] + [
        LiveAction(f"r{i:03d}", "retry_from_dlq", broker.name, dlq, in_dlq[body],
                   orig_queue="kill.r")
        for i, body in enumerate(retry_bodies)
    ]  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps([dataclasses.asdict(a) for a in plan]))

    # kill -9 in the middle of the broker phase, then just after an intent, then after the
    # broker steps of a batch and before its ledger write.
    for crash_at, extra in (
        ("during:broker", {"POISONWATCH_CRASH_DELAY": "1.5"}),
        ("artemis:after_intent", {}),
        ("after_broker", {}),
    ):
        proc = _child(broker, tmp_path, crash_at, **extra)
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == -9, f"{crash_at}: {proc.returncode}\n{out}\n{err}"
    killed_with = len(_ledger(tmp_path))
    # The broker crashes (kill -9) while a run is under way, and comes back.
    proc = _child(broker, tmp_path)
    deadline = time.monotonic() + 300
    while len(_ledger(tmp_path)) < killed_with + BATCH and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.stop(kill=True)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 3 and "cannot reach" in err, f"{proc.returncode}\n{err}"
    broker.start()
    proc = _child(broker, tmp_path)
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err

    ledger = _ledger(tmp_path)
    by_id = collections.Counter(r["action_id"] for r in ledger)
    assert sorted(by_id) == sorted(a.action_id for a in plan) and set(by_id.values()) == {1}
    statuses = collections.Counter(r["status"] for r in ledger)
    assert set(statuses) <= {"applied", "already_applied"}, [
        r for r in ledger if r["status"] not in ("applied", "already_applied")
    ]
    assert statuses["already_applied"] >= 1, statuses  # a killed run's step found by the next
    where, dlqs = _where(acts), _dead_letter_queues(acts)
    for i, body in enumerate(bodies):
        kind = kinds[i % 3]
        if kind == "dead_letter":
            assert _dead_lettered(where, body, dlqs), (body, where.get(body))
        else:
            want = ["kill.q.parked"] if kind == "park" else []
            assert where.get(body, []) == want, (body, kind, where.get(body))
    for body in retry_bodies:
        assert where.get(body, []) == ["kill.r"], (body, where.get(body))
    assert not set(acts.journal_ids()) & set(by_id)  # the last run removed every marker
    print(f"ledger: {dict(statuses)}; kills left {killed_with} actions in the ledger")
