"""The seeds' own examples, end to end with the shipped seeds: landing files
(support/seed_scenarios.py) → `poisonwatch build --ingest` (the ingest and the production build in
one driver) → `poisonwatch plan --sql --format json` and the marts, asserted on exact text and
rows. One store holds every scenario (names of their own per example); the tests only read it.

Policies the shipped seeds lack (error 127, M = 8 / 20, mode MANY for named consumers) are rows
added for those queues and consumers only, in a copy of the project (README, "Policies"); every
other scenario is decided by the shipped rows, kept as shipped.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from support import seed_scenarios as s
from support.child_python import run_py

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent / "poisonwatch"
TIMEOUT = 1800


def _declared_check_constraints() -> dict[str, set[str]]:
    """Each mart's check constraint names, as models/marts/_*__models.yml declares them; the
    backtests (tag on_demand) are not in the production build."""
    declared: dict[str, set[str]] = {}
    marts = ROOT / "models" / "marts"
    for path in sorted(marts.glob("_*__models.yml")):
        for model in yaml.safe_load(path.read_text(encoding="utf-8"))["models"]:
            if "on_demand" in (marts / f"{model['name']}.sql").read_text(encoding="utf-8"):
                continue
            declared[model["name"]] = {
                c["name"].lower() for c in model.get("constraints", []) if c["type"] == "check"
            }
    return declared


CHECKS = _declared_check_constraints()
QUERIES = {
    "poison_messages": (
        "select coalesce(conversation_handle, message_id), classification, reason, failure_count,"
        " delivery_count, policy_name, error_code, error_description, next_redelivery_delay_ms,"
        " cast(next_redelivery_at as string)"
        " from poisonwatch.poison_messages"
        " where server_name in ('SQL000', 'SQL001') or broker_name = 'artemis-jms'"
    ),
    "queue_health": (
        "select cast(snapshot_at as string), current_rollback_run, longest_rollback_run,"
        " disable_risk, is_disabled from poisonwatch.queue_health"
        f" where server_name = '{s.RESET_SERVER}' and queue_name = '{s.RESET_QUEUE}'"
        " order by snapshot_at"
    ),
    "breakers": (
        "select consumer_id, breaker_mode, max_consecutive_failures, same_type_threshold,"
        " longest_same_type_run, longest_any_type_run, reporting_servers, is_tripped,"
        " trip_reason, scheduled_group from poisonwatch.consumer_circuit_breakers"
    ),
    "purges": (
        "select consumer_id, activation_id, purge_scope, cast(purge_before as string),"
        " purge_record_count from poisonwatch.remediation_actions"
        " where action_type = 'purge_failure_log'"
    ),
    "snapshots": (
        "select conversation_handle, validation from poisonwatch_staging."
        f"stg_service_broker__queue_snapshots where queue_name = '{s.SB001_QUEUE}'"
    ),
    "rejects": "select count(*) from raw.raw_rejects",
    **{f"properties {m}": f"show tblproperties poisonwatch.{m}" for m in CHECKS},
}
# A row that breaks a mart's check constraint (an unknown broker kind): Delta must refuse it.
BREAK = "update poisonwatch.poison_messages set broker_kind = 'websphere'"

# `poisonwatch plan` as a user runs it, then the queries, in one process and one JVM.
QUERY_SCRIPT = """
import contextlib, io, json, os
from poisonwatch.cli import main
from poisonwatch.warehouse.engine import connect
queries = json.loads(os.environ["PW_QUERIES"])
plan = io.StringIO()
with contextlib.redirect_stdout(plan):
    code = main(["plan", "--sql", os.environ["PW_PLAN_SQL"], "--format", "json"])
assert code == 0, plan.getvalue()[-3000:]
with connect("local") as e:
    out = {k: [[None if v is None else v if isinstance(v, (bool, int)) else str(v) for v in r]
               for r in e.query(q)[1]] for k, q in queries.items()}
    try:
        e.execute(os.environ["PW_BREAK"])
        out["break"] = "accepted"
    except Exception as error:
        out["break"] = str(error)[:3000]
out["plan"] = plan.getvalue()
print("@@" + json.dumps(out))
"""


def pw(env: dict[str, str], cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [str(BIN), *args],
        env={**env, "COLUMNS": "200"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return proc


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The built store's plan (JSON actions, T-SQL scripts by server) and mart rows."""
    tmp = tmp_path_factory.mktemp("seed-examples")
    project = s.write_policy_project(ROOT, tmp / "project")
    s.write_landing(tmp / "landing")
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(tmp / "home"),
        "POISONWATCH_PROJECT_DIR": str(project),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": "2g",
        # Models and seeds: the rows are pinned below and the marts' check constraints hold on
        # every write; the data tests run in the demo's builds (scripts/test.sh).
        "POISONWATCH_DATA_TESTS": "off",
    }
    build = pw(env, project, "build", "--ingest", str(tmp / "landing"))
    assert "0 row(s) written to raw.raw_rejects" in build.stdout, build.stdout[-3000:]
    said = " ".join((build.stdout + build.stderr).split())
    assert re.search(r"dbt build .*--exclude-resource-type (unit_test )?test\b", said), said[-3000:]
    again = pw(env, project, "build")
    (tmp / "sql").mkdir()
    rows = run_py(
        QUERY_SCRIPT,
        {
            **env,
            "COLUMNS": "200",
            "PW_QUERIES": json.dumps(QUERIES),
            "PW_BREAK": BREAK,
            "PW_PLAN_SQL": str(tmp / "sql" / "fix.sql"),
        },
    )
    plan = rows.pop("plan")
    actions = [json.loads(line) for line in plan.splitlines() if line.startswith("{")]
    scripts = {
        server: Path(path).read_text(encoding="utf-8")
        for server, path in re.findall(r"for server (\S+) to (\S+\.sql)", plan)
    }
    return {"actions": actions, "scripts": scripts, "build_again": again.stderr, **rows}


def test_a_build_with_nothing_new_starts_no_spark(store: dict[str, Any]) -> None:
    """On Delta ledgers too: the logs' versions are those the build recorded."""
    said = " ".join(store["build_again"].split())  # rich wraps at the terminal width
    assert "skipped, nothing new" in said, said[-2000:]
    assert "(no Spark started)" in said, said[-2000:]


def test_marts_carry_their_contracts_check_constraints(store: dict[str, Any]) -> None:
    """Each mart's Delta table holds the check constraints its YAML names, and Delta enforces
    them: written in the create statement (macros/utils/tblproperties_clause.sql)."""
    assert len(CHECKS) == 9, sorted(CHECKS)
    for mart, names in CHECKS.items():
        keys = {k for k, _ in store[f"properties {mart}"]}
        held = {k.removeprefix("delta.constraints.") for k in keys if "constraints." in k}
        assert names and held == names, (mart, sorted(held), sorted(names))
    assert "poison_messages_broker_kind_accepted" in store["break"], store["break"][:2000]
    assert "DELTA_VIOLATE_CONSTRAINT" in store["break"], store["break"][:2000]


def _actions(store: dict[str, Any], **match: Any) -> list[dict[str, Any]]:
    return [a for a in store["actions"] if all(a[k] == v for k, v in match.items())]


def _message(store: dict[str, Any], key: str) -> list[Any]:
    (row,) = [r for r in store["poison_messages"] if r[0] == key]
    return row


def _context(database: str) -> str:
    return (
        f"DECLARE @sp_executesql NVARCHAR(400) = QUOTENAME(N'{database}')"
        " + N'.sys.sp_executesql';\n"
    )


def end_conversation_text(database: str, handle: str, code: int) -> str:
    """Seed 000's END CONVERSATION … WITH ERROR = code DESCRIPTION = N'Unable to process
    message.', then its ClearMessageTracking, as the script carries them."""
    return (
        _context(database)
        + "DECLARE @error_description NVARCHAR(3000) = N'Unable to process message.';\n"
        "EXEC @sp_executesql\n"
        "    N'END CONVERSATION @conversation_handle WITH ERROR = @error_code"
        " DESCRIPTION = @error_description;',\n"
        "    N'@conversation_handle UNIQUEIDENTIFIER, @error_code INT,"
        " @error_description NVARCHAR(3000)',\n"
        f"    @conversation_handle = N'{handle}',\n"
        f"    @error_code = {code},\n"
        "    @error_description = @error_description;\n"
        "EXEC @sp_executesql\n"
        "    N'EXEC [dbo].[ClearMessageTracking] @conversationHandle = @conversation_handle;',\n"
        "    N'@conversation_handle UNIQUEIDENTIFIER',\n"
        f"    @conversation_handle = N'{handle}';"
    )


# Seed 001's review: receive in a transaction, print the body by validation, roll back.
PRINT_BY_VALIDATION = {
    "E": "ELSE IF @validation = ''E''\n    PRINT ''Empty message.'';\n",
    "X": "ELSE IF @validation = ''X''\n    PRINT CONVERT(NVARCHAR(MAX), @message_body);\n",
    "N": (
        "ELSE\n    BEGIN\n        PRINT ''No validation -- binary message:'';\n"
        "        PRINT @message_body;\n    END;\n"
    ),
}


def inspect_text(database: str, queue: str, handle: str) -> str:
    schema, name = queue.split(".")
    return (
        _context(database)
        + "-- Review only: the transaction always rolls back, the message stays in the queue.\n"
        "DECLARE @statement NVARCHAR(MAX) = N'BEGIN TRANSACTION;\n"
        "DECLARE @message_body VARBINARY(MAX), @validation NCHAR(1);\n"
        "WAITFOR (\n"
        "    RECEIVE TOP(1) @message_body = message_body, @validation = validation\n"
        f"    FROM [{database}].[{schema}].[{name}]\n"
        "    WHERE conversation_handle = @conversation_handle\n"
        "), TIMEOUT 2000;\n"
        "IF @@ROWCOUNT = 0\n"
        "    PRINT ''No message available.'';\n"
        + PRINT_BY_VALIDATION["E"]
        + PRINT_BY_VALIDATION["X"]
        + PRINT_BY_VALIDATION["N"]
        + "ROLLBACK TRANSACTION;';\n"
        "EXEC @sp_executesql\n"
        "    @statement,\n"
        "    N'@conversation_handle UNIQUEIDENTIFIER',\n"
        f"    @conversation_handle = N'{handle}';"
    )


def _batch_in_script(script: str, statement: str) -> None:
    """The statement is one whole batch of the server's script (it ends at a GO line)."""
    assert "\n" + statement + "\nGO\n" in script


# --- Seed 000: TrackMessage's END CONVERSATION on the fourth failure -------------------------


def test_seed_000_fourth_failure_ends_conversation_with_500_then_clears_tracking(
    store: dict[str, Any],
) -> None:
    assert _message(store, s.SB000_FOURTH)[1:8] == [
        "poison", "threshold_exceeded", 4, None, "service_broker_default", 500,
        "Unable to process message.",
    ]  # fmt: skip
    (action,) = _actions(store, conversation_handle=s.SB000_FOURTH)
    assert action["action_type"] == "end_conversation"
    expected = end_conversation_text(s.SB000_DATABASE, s.SB000_FOURTH, 500)
    assert action["statement"] == expected
    _batch_in_script(store["scripts"][s.SB000_SERVER], expected)


def test_seed_000_third_failure_ends_nothing(store: dict[str, Any]) -> None:
    assert _message(store, s.SB000_THIRD)[1:4] == ["suspect", "at_threshold", 3]
    # Only seed 001's review script, which rolls back: nothing is removed.
    (action,) = _actions(store, conversation_handle=s.SB000_THIRD)
    assert (action["action_type"], action["requires_review"]) == ("inspect_message", True)
    assert "END CONVERSATION" not in action["statement"]
    script = store["scripts"][s.SB000_SERVER]
    assert script.count("END CONVERSATION") == 1
    assert f"@conversation_handle = N'{s.SB000_THIRD}',\n    @error_code" not in script


# --- Seed 001: the inspect script by validation, and END CONVERSATION … WITH ERROR = 127 ------


@pytest.mark.parametrize("validation", ["E", "X", "N"])
def test_seed_001_inspect_script_per_validation(store: dict[str, Any], validation: str) -> None:
    handle = s.SB001_SUSPECT[validation]
    assert [handle, validation] in store["snapshots"]
    assert _message(store, handle)[1:3] == ["suspect", "at_threshold"]
    (action,) = _actions(store, conversation_handle=handle)
    assert (action["action_type"], action["requires_review"]) == ("inspect_message", True)
    expected = inspect_text(s.SB001_DATABASE, s.SB001_QUEUE, handle)
    assert action["statement"] == expected
    assert PRINT_BY_VALIDATION[validation] in action["statement"]
    _batch_in_script(store["scripts"][s.SB001_SERVER], expected)


def test_seed_001_policy_ends_conversation_with_error_127(store: dict[str, Any]) -> None:
    assert _message(store, s.SB001_127_HANDLE)[1:8] == [
        "poison", "threshold_exceeded", 4, None, "retired_items", 127,
        "Unable to process message.",
    ]  # fmt: skip
    (action,) = _actions(store, conversation_handle=s.SB001_127_HANDLE)
    assert (action["action_type"], action["policy_name"]) == ("end_conversation", "retired_items")
    expected = end_conversation_text(s.SB001_DATABASE, s.SB001_127_HANDLE, 127)
    assert action["statement"] == expected
    _batch_in_script(store["scripts"][s.SB001_SERVER], expected)


# --- Seed 002: failure-log retention ---------------------------------------------------------


def _purge(store: dict[str, Any], consumer: str) -> tuple[list[Any], dict[str, Any]]:
    (row,) = [r for r in store["purges"] if r[0] == consumer]
    (action,) = _actions(store, consumer_id=consumer, action_type="purge_failure_log")
    return row, json.loads(action["statement"])


def _command(consumer: str, activation: str, scope: str, before: str | None) -> dict[str, Any]:
    command = {
        "type": "agent-platform",
        "operation": "purge_failure_log",
        "consumer_id": consumer,
        "server_name": s.RET_SERVER,
        "activation_id": activation,
        "scope": scope,
    }
    return command if before is None else {**command, "before": before}


def test_retention_succeeded_last_activation_purges_all_its_failures(
    store: dict[str, Any],
) -> None:
    # ok-2's two failures; ok-1's (an earlier activation) stays.
    row, command = _purge(store, s.RET_SUCCEEDED)
    assert row == [s.RET_SUCCEEDED, "ok-2", "activation", None, 2]
    assert command == _command(s.RET_SUCCEEDED, "ok-2", "activation", None)


def test_retention_failed_last_activation_purges_older_than_n_days(
    store: dict[str, Any],
) -> None:
    # The boundary is N days (the shipped var) before f-2's start. The failures 3 days and
    # 1 minute before it go; the ones 1 minute after it and later stay.
    row, command = _purge(store, s.RET_FAILED)
    assert row == [s.RET_FAILED, "f-2", "older_than", "2026-11-13 07:00:00", 2]
    assert command == _command(s.RET_FAILED, "f-2", "older_than", "2026-11-13T07:00:00.000Z")


def test_retention_running_is_not_a_completion_after_succeeded(store: dict[str, Any]) -> None:
    # rs-2 is running: the last completed activation is rs-1, and only its failure goes.
    row, command = _purge(store, s.RET_RUNNING_AFTER_SUCCEEDED)
    assert row == [s.RET_RUNNING_AFTER_SUCCEEDED, "rs-1", "activation", None, 1]
    assert command == _command(s.RET_RUNNING_AFTER_SUCCEEDED, "rs-1", "activation", None)


def test_retention_running_is_not_a_completion_after_failed(store: dict[str, Any]) -> None:
    # rf-2 is running: N days count from rf-1's start, so one failure goes, two stay.
    row, command = _purge(store, s.RET_RUNNING_AFTER_FAILED)
    assert row == [s.RET_RUNNING_AFTER_FAILED, "rf-1", "older_than", "2026-11-13 07:00:00", 1]
    assert command == _command(
        s.RET_RUNNING_AFTER_FAILED, "rf-1", "older_than", "2026-11-13T07:00:00.000Z"
    )


# --- Seed 002: the fuse ------------------------------------------------------------------------


def _breaker(store: dict[str, Any], consumer: str) -> list[Any]:
    (row,) = [r for r in store["breakers"] if r[0] == consumer]
    return row


@pytest.mark.parametrize(
    ("consumer", "expected"),
    [
        # consumer: mode, M, N, longest same-type run, longest any-type run, reporting, tripped
        (s.FUSE_M8_TRIPS, ["ANY", 8, 2, 2, 2, s.FUSE_SERVER, True, "same_exception_type"]),
        (s.FUSE_M8_ONE, ["ANY", 8, 2, 1, 1, None, False, None]),
        (s.FUSE_M8_ANY_TYPES, ["ANY", 8, 2, 1, 8, s.FUSE_SERVER, True, "any_exception_types"]),
        (s.FUSE_M20_TRIPS, ["ANY", 20, 6, 6, 6, s.FUSE_SERVER, True, "same_exception_type"]),
        (s.FUSE_M20_FIVE, ["ANY", 20, 6, 5, 5, None, False, None]),
    ],
)
def test_fuse_n_is_m_over_3_truncated(
    store: dict[str, Any], consumer: str, expected: list[Any]
) -> None:
    # M = 8: N = 2 (8/3 rounds to 3); M = 20: N = 6 (20/3 rounds to 7).
    assert _breaker(store, consumer)[1:9] == expected
    disables = _actions(store, consumer_id=consumer, action_type="disable_consumer")
    assert len(disables) == (1 if expected[6] else 0)


def test_fuse_any_trips_on_one_server_many_needs_two(store: dict[str, Any]) -> None:
    assert _breaker(store, s.MODE_ANY)[1:9] == [
        "ANY", 10, 3, 3, 3, "app-m1", True, "same_exception_type",
    ]  # fmt: skip
    assert _breaker(store, s.MODE_MANY_ONE)[1:9] == ["MANY", 10, 3, 3, 3, "app-m1", False, None]
    assert _breaker(store, s.MODE_MANY_TWO)[1:9] == [
        "MANY", 10, 3, 3, 3, "app-m1,app-m2", True, "same_exception_type",
    ]  # fmt: skip
    tripped = {a["consumer_id"] for a in _actions(store, action_type="disable_consumer")}
    assert {s.MODE_ANY, s.MODE_MANY_TWO} <= tripped
    assert s.MODE_MANY_ONE not in tripped


def test_fuse_scheduled_group_disabled_whole(store: dict[str, Any]) -> None:
    reasons = {c: _breaker(store, c)[7:10] for c in s.NIGHTLY}
    assert reasons == {
        s.NIGHTLY[0]: [True, "same_exception_type", "nightly"],
        s.NIGHTLY[1]: [True, "scheduled_group", "nightly"],
        s.NIGHTLY[2]: [True, "scheduled_group", "nightly"],
    }
    commands = {
        a["consumer_id"]: json.loads(a["statement"])
        for a in _actions(store, action_type="disable_consumer", scheduled_group="nightly")
    }
    assert commands == {
        consumer: {
            "type": "agent-platform",
            "operation": "disable_consumer",
            "consumer_id": consumer,
            "scheduled_group": "nightly",
            "reason": reasons[consumer][1],
        }
        for consumer in s.NIGHTLY
    }


def test_fuse_disables_exactly_the_tripped_settings(store: dict[str, Any]) -> None:
    assert sorted(a["consumer_id"] for a in _actions(store, action_type="disable_consumer")) == [
        s.FUSE_M20_TRIPS, s.FUSE_M8_ANY_TYPES, s.FUSE_M8_TRIPS, s.MODE_ANY, s.MODE_MANY_TWO,
        *sorted(s.NIGHTLY),
    ]  # fmt: skip


# --- Queue rollback runs and JMS messages ----------------------------------------------------


def test_queue_rollback_run_reset_by_committed_and_ended_conversation(
    store: dict[str, Any],
) -> None:
    # Eleven whole-transaction rollbacks on the queue, never five in a row: not disabled.
    assert store["queue_health"] == [
        ["2026-11-20 08:10:00", 4, 4, "at_risk", False],
        ["2026-11-20 08:20:00", 0, 4, "ok", False],  # after `committed`
        ["2026-11-20 08:30:00", 4, 4, "at_risk", False],
        ["2026-11-20 08:40:00", 0, 4, "ok", False],  # after `ended_conversation`
        ["2026-11-20 08:50:00", 3, 4, "ok", False],
    ]
    assert _actions(store, queue_name=s.RESET_QUEUE, action_type="re_enable_queue") == []


def test_jms_message_first_seen_at_delivery_count_10_is_poison(store: dict[str, Any]) -> None:
    # One failed attempt in the log, but the broker has delivered it ten times.
    assert _message(store, s.JMS_FIRST_AT_10)[1:6] == [
        "poison", "max_deliveries", 1, 10, "jms_default",
    ]  # fmt: skip
    assert _message(store, s.JMS_FIRST_AT_9)[1:6] == [
        "suspect", "at_threshold", 1, 9, "jms_default",
    ]  # fmt: skip
    (action,) = _actions(store, message_id=s.JMS_FIRST_AT_10)
    assert action["action_type"] == "dead_letter"
    assert json.loads(action["statement"]) == {
        "type": "exec",
        "mbean": 'org.apache.activemq.artemis:broker="artemis-jms",component=addresses,'
        'address="inventory",subcomponent=queues,routing-type="anycast",'
        'queue="inventory.agent"',
        "operation": "sendMessagesToDeadLetterAddress(java.lang.String)",
        "arguments": [f"AMQUserID = '{s.JMS_FIRST_AT_10}'"],
    }
    assert _actions(store, message_id=s.JMS_FIRST_AT_9) == []


def test_jms_retrying_message(store: dict[str, Any]) -> None:
    # Two deliveries of ten: the broker redelivers after 1000 ms x 2.0^(2 - 1).
    assert _message(store, s.JMS_RETRYING)[1:10] == [
        "retrying", "below_threshold", 2, 2, "jms_default", None, None, 2000,
        "2026-11-20 08:06:02",
    ]  # fmt: skip
    assert _actions(store, message_id=s.JMS_RETRYING) == []
    assert _breaker(store, s.RETRY_CONSUMER)[7] is False


def test_plan_holds_exactly_the_examples_actions(store: dict[str, Any]) -> None:
    assert store["rejects"] == [[0]]
    counts: dict[str, int] = {}
    for action in store["actions"]:
        counts[action["action_type"]] = counts.get(action["action_type"], 0) + 1
    assert counts == {
        "end_conversation": 2,  # seed 000's fourth failure, seed 001's 127
        "inspect_message": 5,  # seed 000's third failure, E / X / N, the reset queue's message
        "disable_consumer": 8,
        "dead_letter": 1,
        "purge_failure_log": 4,
    }
    assert set(store["scripts"]) == {s.SB000_SERVER, s.SB001_SERVER, s.RESET_SERVER}
