"""`poisonwatch backtest --candidates FILE`: a candidate file is validated before any SQL is made
(errors name the file, line and field), the project's own candidate seeds pass, and the SQL made
from a file holds only quoted literals. The marts are exercised by dbt unit tests
(backtest_decides_where_the_live_ladder_would, backtest_breaker_trips_where_the_live_fuse_would,
error_class_evidence_judges_each_signature_against_the_seed) and by the backtest and
error-evidence steps of scripts/test.sh; here, what the backtest prints from the evidence."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from poisonwatch.backtest import BREAKER_COLUMNS, POLICY_COLUMNS, load_candidates
from poisonwatch.backtest.candidates import insert_statement
from poisonwatch.backtest.run import policy_change, print_evidence
from poisonwatch.config import PoisonwatchError, project_root

HEADER = ",".join(POLICY_COLUMNS)


def _file(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "candidates.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_the_project_seeds_are_valid_candidate_files() -> None:
    kind, rows = load_candidates(project_root() / "seeds" / "candidate_policies.csv")
    assert kind == "policy" and {r["candidate_name"] for r in rows} >= {"first_failure"}
    kind, rows = load_candidates(project_root() / "seeds" / "candidate_consumer_policies.csv")
    assert kind == "breaker" and list(rows[0]) == list(BREAKER_COLUMNS)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("t7,t7,service_broker,*,seven,,1,true,,,,,,,", "line 2, field failure_threshold"),
        ("t7,t7,rabbitmq,*,7,,1,true,,,,,,,", "line 2, field broker_kind"),
        ("t7,t7,service_broker,*,7,,1,maybe,,,,,,,", "line 2, field validation_is_poison"),
        ("current,c,service_broker,*,7,,1,true,,,,,,,", "`current` is reserved"),
        ("t7,t7,service_broker,*,-1,,1,true,,,,,,,", "line 2, field failure_threshold"),
        ("t7,t7,service_broker,*,7", "5 fields"),
    ],
)
def test_bad_values_name_file_line_and_field(tmp_path: Path, line: str, message: str) -> None:
    path = _file(tmp_path, HEADER, line)
    with pytest.raises(PoisonwatchError, match=message) as info:
        load_candidates(path)
    assert str(path) in str(info.value)


def test_a_wrong_header_is_refused(tmp_path: Path) -> None:
    with pytest.raises(PoisonwatchError, match="line 1: the header"):
        load_candidates(_file(tmp_path, "name,threshold", "a,1"))


def test_sql_from_a_file_is_quoted_literals(tmp_path: Path) -> None:
    hostile = "Q'); drop table x; --\\"
    path = _file(tmp_path, HEADER, f'"t7",t7,service_broker,"{hostile}",7,,,false,,,,,,,')
    kind, rows = load_candidates(path)
    sql = insert_statement("`poisonwatch_policy`.`candidate_policies`", kind, rows)
    assert "'Q\\'); drop table x; --\\\\'" in sql
    assert "cast(7 as int)" in sql and "cast(null as int)" in sql


def test_the_change_names_the_queue_and_settings() -> None:
    best = {
        "candidate_name": "sb_threshold_5",
        "broker_kind": "service_broker",
        "queue_name": "ExpenseQueue",
        "failure_threshold": 5,
        "max_delivery_attempts": 10,
        "permanent_error_threshold": 1,
        "validation_is_poison": True,
    }
    in_force = dict(
        best, candidate_name="current", failure_threshold=3, policy_name="service_broker_default"
    )
    change = policy_change(best, in_force)
    assert "service_broker/ExpenseQueue" in change and "failure_threshold 5" in change
    assert "keep" in policy_change(dict(best, failure_threshold=3), in_force)


def _evidence(**changes: object) -> dict[str, object]:
    row: dict[str, object] = {
        "broker_kind": "service_broker",
        "error_key": "1205",
        "normalized_message": "deadlock <number>",
        "seed_failure_class": "transient",
        "failure_count": 6,
        "message_count": 2,
        "success_share": 0.0,
        "evidence_class": "permanent",
        "is_reclassification_recommended": True,
        "recommended_class": "permanent",
        "attempts_saved": 4,
        "false_poison_avoided": 0,
    }
    return {**row, **changes}


def test_the_evidence_names_the_seed_change_and_what_it_saves() -> None:
    out = io.StringIO()
    agreeing = _evidence(error_key="2627", is_reclassification_recommended=False)
    unknown = _evidence(
        error_key="8152",
        seed_failure_class="unknown",
        recommended_class="transient",
        evidence_class="transient",
        success_share=1.0,
        attempts_saved=0,
        false_poison_avoided=3,
    )
    print_evidence([_evidence(), agreeing, unknown], Console(file=out, width=80))
    text = " ".join(out.getvalue().split())
    assert "3 error signatures, 3 with evidence either way, 2 contradicting" in text
    assert "set service_broker,1205,permanent" in text and "4 failed attempts saved" in text
    assert "add the row service_broker,8152,transient" in text
    assert "3 messages not declared poison that recovered" in text
    assert "2627" not in text


def test_an_error_with_two_signatures_gets_its_seed_change_once() -> None:
    out = io.StringIO()
    rows = [_evidence(), _evidence(normalized_message="deadlock on <literal>")]
    print_evidence(rows, Console(file=out, width=80))
    text = " ".join(out.getvalue().split())
    assert text.count("set service_broker,1205,permanent") == 1
    assert "deadlock <number>" in text and "deadlock on <literal>" in text


def test_hostile_error_texts_in_the_evidence_are_inert() -> None:
    out = io.StringIO()
    hostile = _evidence(
        error_key="x[bold]\x1b]8;;http://evil\x07y", normalized_message="\x1b[2J[red]boom[/red]"
    )
    print_evidence([hostile], Console(file=out, width=80, force_terminal=True))
    text = out.getvalue()
    assert "\x1b]8" not in text and "\x1b[2J" not in text and "\x07" not in text
    # Markup is shown as text, not applied (rich's own highlighting aside).
    plain = re.sub("\x1b\\[[0-9;]*m", "", text)
    assert "[red]boom[/red]" in plain and "x[bold]" in plain
