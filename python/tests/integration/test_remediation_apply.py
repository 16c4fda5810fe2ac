"""`poisonwatch apply` end to end on a real store: exactly once under kill -9, concurrent applies
refused, re-plan gives the same action ids, the next dbt run reflects the effects, replay.
(Models are built with `dbt seed` + `dbt run` of the marts plan, apply and replay read and what
they are built from: other models, and all models' data tests, are not the subject; they run in
scripts/test.sh's demo build.)

Every `poisonwatch` a test kills is a real subprocess with its own Spark JVM; crashes are real
SIGKILLs injected with POISONWATCH_CRASH_AT. The commands between kills and queries run one after
another in the child process that then queries (`query(calls=...)`), one JVM per step. Derby
allows one process at a time, so everything here runs one after another.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from support.child_python import run_cli_calls, run_py
from support.fixtures.remediation import BIG_ERROR_CHARS, HANDLE_DISPOSABLE, HIJACK, JMS_POISON_IDS

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"
TIMEOUT = 1200

# Effect table written by each action type that apply applies in the fixture.
EFFECT_OF = {
    "end_conversation": "ended_conversations",
    "dead_letter": "dead_letter_queue",
    "disable_consumer": "disabled_consumers",
    "discard": "discarded_messages",
    "purge_failure_log": "purged_failure_logs",
    "retry_from_dlq": "replayed_messages",
}


def pw(env: dict[str, str], *args: str, extra: dict[str, str] | None = None):
    return subprocess.run(
        [str(BIN), *args],
        env={**env, **(extra or {}), "COLUMNS": "200"},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )


QUERY = """
import contextlib, io, json
from poisonwatch.cli import main
from poisonwatch.warehouse.dbtrun import run_dbt
from poisonwatch.warehouse.engine import connect
out = {"calls": []}
for args in CALLS:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    out["calls"].append([code, stdout.getvalue() + stderr.getvalue()])
with connect("local") as e:
    if SEED:
        from support.fixtures.remediation import load_fixture
        load_fixture(e)
        run_dbt(["seed"])
    if DBT_ARGS:
        run_dbt(DBT_ARGS)
    for name, sql in QUERIES.items():
        cols, rows = e.query(sql)
        out[name] = [[None if v is None else str(v) for v in r] for r in rows]
print("@@" + json.dumps(out))
"""


def query(
    env: dict[str, str],
    queries: dict[str, str],
    *,
    dbt_args: list[str] | None = None,
    seed: bool = False,
    calls: Sequence[Sequence[str]] = (),
) -> dict[str, Any]:
    """The rows of each query, in one child process (one JVM start); with `dbt_args`, after
    that dbt command in the same process; with `seed`, after loading the fixture's raw tables
    and `dbt seed` first. `calls` are `poisonwatch` commands run first in that process, one
    after another as a user runs them (their exit code and output: `calls`): a driver's start
    per command would prove nothing more, except where a command must be killed."""
    code = (
        f"QUERIES = {queries!r}\nDBT_ARGS = {dbt_args!r}\nSEED = {seed!r}\n"
        f"CALLS = {[list(c) for c in calls]!r}\n" + QUERY
    )
    return run_py(code, {**env, "COLUMNS": "200"})


# The marts `plan`, `apply` and `replay` read (and the tests query), with everything upstream of
# them: 38 of the project's models. The alert models and the on-demand backtests are left out.
RUN_SELECT = ["+remediation_actions", "+poison_messages", "+dlq_messages"]
RUN = ["run", "--select", *RUN_SELECT]
# After an apply, only what reads the remediation ledger and its effects (the `ops` sources),
# as `poisonwatch build` selects after one: 20 of RUN_SELECT's 38 models (the others, such as
# the attempt models, have no new input).
RUN_AFTER_APPLY = ["run", "--select", *(f"source:ops+,{m}" for m in RUN_SELECT)]


ACTIONS_SQL = (
    "select action_id, action_type, requires_review, status, message_id "
    "from poisonwatch.remediation_actions order by action_id"
)


@pytest.fixture(scope="module")
def built(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, str], list[list[str | None]]]:
    """The store (its environment) and the actions planned on it before any apply."""
    home = tmp_path_factory.mktemp("remediation-store")
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(home),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": "2g",
    }
    for key in ("POISONWATCH_CRASH_AT", "POISONWATCH_PAUSE_AT"):
        env.pop(key, None)
    planned = query(env, {"a": ACTIONS_SQL}, dbt_args=RUN, seed=True)["a"]
    return env, planned


@pytest.fixture(scope="module")
def store(built: tuple[dict[str, str], list[list[str | None]]]) -> dict[str, str]:
    return built[0]


@pytest.fixture(scope="module")
def planned(built: tuple[dict[str, str], list[list[str | None]]]) -> list[list[str | None]]:
    return built[1]


def test_fixture_plans_every_action_type(planned: list[list[str | None]]) -> None:
    types = {r[1] for r in planned}
    assert types >= {
        "end_conversation",
        "re_enable_queue",
        "inspect_message",
        "discard",
        "dead_letter",
        "retry_from_dlq",
        "disable_consumer",
        "purge_failure_log",
    }
    review = {r[1] for r in planned if r[2] == "True"}
    assert review == {"inspect_message", "retry_from_dlq"}
    assert {r[3] for r in planned} == {"pending"}


def test_hostile_text_is_inert_in_every_output(store: dict[str, str]) -> None:
    """Error texts, bodies and message ids carry rich markup, an ANSI clear-screen, HTML, a
    spreadsheet formula, a right-to-left override and 1 MB of text (fixture HIJACK): the
    plan table and `poisonwatch sql` in every format show them inert."""
    # formula_tail starts with the stored error text's spreadsheet formula, so that the CSV
    # output has a cell a spreadsheet would evaluate unless poisonwatch neutralises it.
    sql = (
        "select message_id, last_error_message, "
        "substr(last_error_message, instr(last_error_message, '=HYPERLINK')) as formula_tail "
        "from poisonwatch.poison_messages "
        "where broker_kind = 'jms' and classification = 'poison' order by message_id"
    )
    # What each command prints, in one child and one JVM (support.child_python.run_cli_calls).
    calls = {fmt: ["sql", "--format", fmt, sql] for fmt in ("table", "csv", "json")}
    calls["plan"] = ["plan", "--type", "dead_letter"]
    done = run_cli_calls(list(calls.values()), {**store, "COLUMNS": "200"})
    outputs = dict(zip(calls, done, strict=True))
    for name, proc in outputs.items():
        assert proc.returncode == 0, (name, proc.stdout[-2000:], proc.stderr[-2000:])
        for raw in ("\x1b", "\u202e", "\x07"):
            assert raw not in proc.stdout + proc.stderr, (name, raw)
    # rich printed the markup as text instead of interpreting it
    assert "[bold red]x[/bold red]" in outputs["plan"].stdout, outputs["plan"].stdout
    assert "\\u202e" in outputs["plan"].stdout
    table = outputs["table"].stdout
    assert "[bold red]HIJACK[/bold red]" in table and "\\x1b[2J" in table
    assert len(table) < 100_000  # the 1 MB error text is cut in a terminal table
    # CSV: the formula is text for a spreadsheet; the 1 MB text is there in full
    csv.field_size_limit(1 << 24)
    cells = [c for row in csv.reader(io.StringIO(outputs["csv"].stdout)) for c in row]
    formula = [c for c in cells if c.lstrip(" '").startswith("=HYPERLINK")]
    assert len(formula) == len(JMS_POISON_IDS), [c[:80] for c in cells]
    assert all(c.startswith("'=HYPERLINK") for c in formula), formula[:1]
    assert not [c for c in cells if c.lstrip(" ").startswith(("=", "+", "@"))]
    assert max(len(c) for c in cells) > BIG_ERROR_CHARS
    # JSON: exact values (escapes only), one object per line
    rows = [json.loads(line) for line in outputs["json"].stdout.splitlines()]
    assert {r["message_id"] for r in rows} == set(JMS_POISON_IDS)
    assert all(r["last_error_message"].startswith("failed: ") or
               r["last_error_message"].startswith(HIJACK) for r in rows)  # fmt: skip
    assert max(len(r["last_error_message"]) for r in rows) == len(HIJACK) + BIG_ERROR_CHARS


def test_concurrent_apply_is_refused(store: dict[str, str], tmp_path: Path) -> None:
    marker = tmp_path / "paused"
    first = subprocess.Popen(
        [str(BIN), "apply", "--yes"],
        env={
            **store,
            "POISONWATCH_PAUSE_AT": "locked",
            "POISONWATCH_PAUSE_FILE": str(marker),
        },
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not marker.exists():
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first apply never took the lock"
            time.sleep(0.2)
        second = pw(store, "apply", "--yes")
        assert second.returncode == 2, second.stdout + second.stderr
        assert "another `poisonwatch apply` is running" in second.stderr
        assert f"pid {first.pid}" in second.stderr
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
    # That the killed holder left nothing behind that blocks the next apply, the first apply of
    # test_exactly_once_under_kill_9 shows: it is killed at its crash point, not refused.


def test_lease_of_another_host_is_refused(store: dict[str, str]) -> None:
    """The cluster path: no shared file lock, the newest lease token in the store decides."""
    result = run_py(
        """
        import json
        from poisonwatch.remediation.apply import apply_actions
        from poisonwatch.warehouse.engine import connect
        from poisonwatch.remediation.plan import Filters
        from poisonwatch.remediation.ledger import (
            TOKEN_COLUMNS, ApplyBusyError, ApplyLock, ensure_ops_tables, lease_tokens)
        with connect("local") as e:
            ensure_ops_tables(e)
            token = f"poisonwatch_ops.apply_lease_{max(lease_tokens(e), default=0) + 1:010d}"
            cols = ", ".join(f"{n} {t}" for n, t in TOKEN_COLUMNS)
            e.execute(f"create table {token} ({cols}) using parquet")
            e.execute(f"insert into {token} select 'acquire', 'other-lease', 'another-host', "
                      "4242, 'boot:4242:1', 'cluster', current_timestamp()")
            try:
                apply_actions(e, Filters(), yes=True, lock=ApplyLock())
                outcome = "applied"
            except ApplyBusyError as exc:
                outcome = str(exc)
            e.execute(f"insert into {token} select 'release', 'other-lease', 'another-host', "
                      "4242, 'boot:4242:1', null, current_timestamp()")
            applied = e.scalar("select count(*) from poisonwatch_ops.action_log")
        print("@@" + json.dumps({"outcome": outcome, "applied": applied}))
        """,
        store,
    )
    assert "pid 4242 on another-host" in result["outcome"]
    assert result["applied"] == 0


# (crash point, extra args, in every `make test`): each run also recovers what the previous one
# left. Each kill is a `poisonwatch apply` with its own JVM, so `make test` kills
# at four: mid effect write (after other effect tables were complete), with every effect and the
# run's scripts written but no log row (its scripts must be set aside), mid commit record (which
# may finish before the kill: then nothing is left to apply), and after the commit of a limited
# run. POISONWATCH_TEST_EVERY_CRASH_POINT=1 adds the other two (an effect table just complete,
# the last one complete): 6 kills, about +90 s.
EVERY_CRASH = [
    ("after:dead_letter_queue", (), False),
    ("during:ended_conversations", (), True),
    ("after:purged_failure_logs", (), False),
    ("before_commit", (), True),
    ("during:action_log", (), True),
    ("after_commit", ("--limit", "3"), True),
]
CRASHES = [
    (point, extra)
    for point, extra, always in EVERY_CRASH
    if always or os.environ.get("POISONWATCH_TEST_EVERY_CRASH_POINT") == "1"
]


# Each dead_letter_queue row against its sources, written independently of apply.py: the last
# snapshot of the message by row_number (apply uses max_by) and its poison_messages row.
DLQ_VS_SOURCES = """
select d.message_id,
    d.body <=> s.body, d.properties <=> s.properties, d.message_type_name <=> p.message_type_name,
    d.delivery_count <=> p.delivery_count, d.failure_class <=> p.failure_class
from poisonwatch_ops.dead_letter_queue d
left join (
    select *, row_number() over (
        partition by broker_name, queue_name, message_id order by snapshot_at desc) as n
    from raw.jms_queue_snapshots
) s
    on s.n = 1 and s.broker_name = d.broker_name and s.queue_name = d.queue_name
    and s.message_id = d.message_id
left join poisonwatch.poison_messages p
    on p.broker_kind = d.broker_kind and p.broker_name <=> d.broker_name
    and p.queue_name <=> d.queue_name and p.message_id <=> d.message_id
"""


def test_a_run_reads_no_history() -> None:
    """A run's effect rows read the run's actions and the per-apply lookup, never the raw
    snapshot tables or poison_messages: those grow with history, and an apply has a run per
    1,000 actions."""
    from poisonwatch.remediation import Filters
    from poisonwatch.remediation.apply import EFFECTS, effect_select, message_context_select

    at = dt.datetime(2026, 11, 23, tzinfo=dt.UTC)
    for table in sorted({t for ts in EFFECTS.values() for t in ts}):
        sql = effect_select(table, ["a1", "a2"], at)
        for history in ("`raw`.", "poison_messages", "queue_snapshots"):
            assert history not in sql, (table, history)
    lookup = message_context_select(Filters(include_review=False))
    assert "jms_queue_snapshots" in lookup and "ssb_queue_snapshots" in lookup
    assert lookup.count("left semi join") == 2  # narrowed to the actions before aggregating


def test_exactly_once_under_kill_9(
    store: dict[str, str], planned: list[list[str | None]], tmp_path: Path
) -> None:
    applicable = {r[0]: r[1] for r in planned if r[2] == "False"}
    killed = 0
    for point, extra in CRASHES:
        proc = pw(store, "apply", "--yes", *extra, extra={"POISONWATCH_CRASH_AT": point})
        if proc.returncode == -signal.SIGKILL:
            killed += 1
        else:  # only possible when an earlier crash committed everything already
            assert proc.returncode == 0, proc.stdout + proc.stderr
            assert "Nothing to apply" in proc.stdout, (point, proc.stdout)
    assert killed >= len(CRASHES) - 1, "the crash points were not reached"

    tables = sorted(set(EFFECT_OF.values()))
    q = {
        "log": "select action_id, run_id from poisonwatch_ops.action_log",
        **{
            t: f"select action_id, run_id from poisonwatch_ops.{t}"
            for t in tables
            if t != "replayed_messages"
        },
        **{
            # Delta keeps partitions in its log: the run_id values its rows hold.
            f"parts:{t}": f"select distinct concat('run_id=', run_id) from poisonwatch_ops.{t}"
            for t in tables
            if t != "replayed_messages"
        },
        "dlq": "select message_id, body, reason from poisonwatch_ops.dead_letter_queue",
        "dlq_vs_sources": DLQ_VS_SOURCES,
    }
    # The apply after the kills recovers what they left (the next one, in a process of its
    # own, finds nothing to do: test_replan_same_ids_and_next_build_reflects_effects).
    got = query(store, q, calls=[["apply", "--yes"]])
    ((final_code, final),) = got["calls"]
    assert final_code == 0, final
    log = got["log"]
    logged = [r[0] for r in log]
    assert sorted(logged) == sorted(applicable), "each applicable action logged exactly once"
    committed = {r[1] for r in log}
    pairs = {(r[0], r[1]) for r in log}
    for action_type, table in EFFECT_OF.items():
        if table == "replayed_messages":
            continue
        rows = got[table]
        expected = sorted(a for a, t in applicable.items() if t == action_type)
        assert sorted(r[0] for r in rows) == expected, f"{table}: one row per action"
        assert all((r[0], r[1]) in pairs for r in rows), f"{table}: rows of committed runs only"
        runs_on_disk = {p[0].split("=", 1)[1] for p in got[f"parts:{table}"]}
        assert runs_on_disk <= committed, f"{table}: uncommitted partitions were dropped"
    # The dead-lettered messages keep their body.
    assert all(r[1] for r in got["dlq"]), got["dlq"]
    # ... the body, properties and type of their last snapshot, and poison_messages' counts,
    # as looked up once per apply (cache_message_context) instead of once per run.
    assert len(got["dlq_vs_sources"]) == len(got["dlq"]) >= 2, got["dlq_vs_sources"]
    for row in got["dlq_vs_sources"]:
        assert row[1:] == ["True"] * 5, row

    # Scripts: exactly the committed runs have one; each Service Broker action in one of them.
    scripts = Path(store["POISONWATCH_HOME"]) / "scripts"
    # apply-<run_id>.<server slug>-<hash>.sql: one script per server and run.
    sql_runs = {p.name.removeprefix("apply-").split(".", 1)[0] for p in scripts.glob("*.sql")}
    assert sql_runs <= committed
    text = "\n".join(p.read_text() for p in scripts.glob("*.sql"))
    for action_id, action_type in applicable.items():
        if action_type in ("end_conversation", "discard", "re_enable_queue"):
            assert text.count(f"action {action_id}") == 1, action_type
    assert list((scripts / "aborted").glob("apply-*")), "scripts of killed runs set aside"
    # The applied scripts (hostile database and queue names in the fixture) parse as T-SQL.
    from sqlfluff.core import Linter

    for path in scripts.glob("*.sql"):
        parsed = Linter(dialect="tsql").parse_string(path.read_text())
        assert not parsed.violations, (path, [str(v) for v in parsed.violations][:3])


def test_replan_same_ids_and_next_build_reflects_effects(
    store: dict[str, str], planned: list[list[str | None]]
) -> None:
    # Runs after test_exactly_once_under_kill_9 (module order): everything applicable applied.
    got = query(
        store,
        {
            "a": ACTIONS_SQL,
            "live": "select conversation_handle, message_id, is_live "
            "from poisonwatch.poison_messages where classification = 'poison'",
            "dlq": "select message_id from poisonwatch.dlq_messages "
            "where is_dead_lettered_by_apply",
        },
        dbt_args=RUN_AFTER_APPLY,
        calls=[
            ["apply", "--yes"],
            ["replay", "--message-id", "ID:d1", "--note", "fixed the agent"],
        ],
    )
    # An apply in a process of its own after the recovering one (the previous test's last):
    # nothing cached from the recovery, nothing left to apply.
    (again_code, again), (replay_code, replayed) = got["calls"]
    assert again_code == 0 and "Nothing to apply" in again, again
    assert replay_code == 0, replayed
    before = {r[0]: r for r in planned}
    after = {r[0]: r for r in got["a"]}
    retry = [r for r in got["a"] if r[1] == "retry_from_dlq"]
    # Same data, same ids: everything planned before is still there (no duplicates); only the
    # review-only retry_from_dlq row was replaced by the requested one.
    assert {a for a, r in before.items() if r[1] != "retry_from_dlq"} <= set(after)
    assert len(after) == len({r[0] for r in got["a"]})
    # ... applicable actions show applied (Service Broker ones, only written to a DBA's
    # script, awaiting_confirmation: no snapshot after the apply), review-only ones pending.
    for action_id, row in before.items():
        if row[2] == "False":
            script_only = row[1] in ("end_conversation", "re_enable_queue") or (
                row[1] in ("discard", "park", "dead_letter") and row[4] in (None, "None")
            )
            expected = "awaiting_confirmation" if script_only else "applied"
            assert after[action_id][3] == expected, row
        elif row[1] == "inspect_message":
            assert after[action_id][3] == "pending"
    # The replay request made ID:d1's retry_from_dlq applicable; the two messages apply
    # dead-lettered are now in the DLQ too, as review-only replay candidates.
    assert sorted((r[4], r[2]) for r in retry) == sorted(
        [("ID:d1", "False"), *((m, "True") for m in JMS_POISON_IDS)]
    ), retry
    # Ended conversations, dead-lettered and discarded messages are not live any more.
    live = got["live"]
    assert any(r[0] == HANDLE_DISPOSABLE for r in live), live
    assert live and all(r[2] == "False" for r in live), got["live"]
    assert len(got["dlq"]) == 2

    # The requested replay planned and applied, then the same message replayed again, in one
    # child: a driver's start per step would prove nothing more.
    done = run_py(
        """
        import contextlib, io, json
        from poisonwatch.cli import main
        from poisonwatch.remediation import Filters, run_apply
        from poisonwatch.warehouse.dbtrun import run_dbt
        from poisonwatch.warehouse.engine import connect
        REPLAYED = "select message_id, orig_queue from poisonwatch_ops.replayed_messages"
        calls = []
        for args in (["plan", "--type", "retry_from_dlq"],
                     ["apply", "--type", "retry_from_dlq", "--yes"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                calls.append([main(args), out.getvalue()])
        with connect("local") as e:
            _, first = e.query(REPLAYED)
        assert main(["replay", "--message-id", "ID:d1", "--note", "again"]) == 0
        # The JMS action family is a table: rebuilt with the mart, or the mart unions its
        # old rows.
        run_dbt(["run", "--select", "stg_ops__replayed_messages", "dlq_messages",
                 "int_remediation_actions__jms_messages", "remediation_actions"])
        applied = run_apply(Filters(action_type="retry_from_dlq"), yes=True)
        with connect("local") as e:
            _, rows = e.query("select message_id from poisonwatch_ops.replayed_messages")
        print("@@" + json.dumps({"calls": calls, "r": [list(r) for r in first],
                                 "applied": sum(applied.applied.values()),
                                 "replayed": [r[0] for r in rows]}))
        """,
        {**store, "COLUMNS": "200"},
    )
    (plan_code, plan), (apply_code, applied) = done["calls"]
    assert plan_code == 0 and "3 pending action(s), 2 for review only" in plan, plan
    assert apply_code == 0, applied
    assert done["r"] == [["ID:d1", "orders.agent"]]

    # Replaying the same message again replays it once: no DLQ snapshot has shown the copy
    # since its replay, so the second request makes no action and apply does nothing.
    assert (done["applied"], done["replayed"]) == (0, ["ID:d1"]), done
