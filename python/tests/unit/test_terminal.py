"""The terminal: help screens fit, and the screen checker used on the demo sees what it must; no
JVM (a bad query's message is checked in integration/test_terminal_spark.py).

The demo itself runs under `terminal_screen.py` in scripts/test.sh (it is the suite's pipeline
step, so the check costs no extra pipeline); here the checker is tested on small programs whose
faults are known, and every help text is measured.
"""

from __future__ import annotations

import sys

import pytest
from support.terminal_screen import COLUMNS, problems, run_in_terminal

from poisonwatch.cli import build_parser

GOOD = r"""
from rich.console import Console
import time
c = Console()
with c.status("working"):
    time.sleep(0.3)
c.print("✓ step one done")
c.rule("demo finished in 1 s")
c.print("Report: " + "/very/long/path/" * 8)
"""


def _python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_quiet_program_passes() -> None:
    screen = run_in_terminal(_python(GOOD))
    assert problems(screen) == [], screen.lines
    assert screen.lines[0] == "✓ step one done"  # the status line left nothing behind
    assert all(len(line) <= COLUMNS for line in screen.lines)


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("print('x' * 100)", "100 columns wide"),
        ("print('12:00:01  3 of 297 START sql view model a.b')", "dbt's log"),
        ("print('the same line'); print('the same line')", "repeats line 1"),
        ("print('\\n'.join(['demo finished'] + ['line %d' % i for i in range(45)]))", "46 lines"),
        ("import sys; sys.exit(3)", "exited with 3"),
    ],
)
def test_the_checker_catches(code: str, expected: str) -> None:
    found = problems(run_in_terminal(_python(code)))
    assert any(expected in p for p in found), found


def test_every_help_fits_one_screen_with_an_example(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(COLUMNS))
    parser = build_parser()
    commands = list(parser._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    for argv in ([], *([c] for c in commands)):
        with pytest.raises(SystemExit):
            parser.parse_args([*argv, "--help"])
        text = capsys.readouterr().out
        lines = text.rstrip("\n").splitlines()
        name = " ".join(argv) or "poisonwatch"
        assert len(lines) <= 40, f"{name} --help has {len(lines)} lines"
        assert max(len(line) for line in lines) <= COLUMNS, name
        assert "example: poisonwatch" in text, f"{name} --help shows no example"


def _actions(n: int) -> list[dict]:
    from poisonwatch.remediation.plan import COLUMNS

    out = []
    for i in range(n):
        a = dict.fromkeys(COLUMNS)
        a.update(
            action_id=f"{i:02d}" * 32,
            action_type=("end_conversation", "inspect_message", "disable_consumer")[i % 3],
            queue_name="dbo.VeryLongQueueNameForTheExpenseReports" if i % 3 != 2 else None,
            conversation_handle="5143B4A3-8CCC-5765-B4BB-4EC48C3FAAAA",
            consumer_id="agent.document-sync",
            reason="threshold_exceeded",
            review_reason="inspect only: the body is shown and rolled back" if i % 3 == 1 else None,
            requires_review=i % 3 == 1,
            collateral_message_count=i,
            sequence_in_script=i + 1,
        )
        out.append(a)
    return out


def test_the_plan_table_fits_80_columns_one_line_per_action() -> None:
    import io
    from collections import Counter

    from rich.console import Console

    from poisonwatch.remediation.plan import Plan, print_plan

    actions = _actions(12)
    plan = Plan(actions, Counter((a["action_type"], a["queue_name"] or "") for a in actions))
    buf = io.StringIO()
    print_plan(plan, Console(file=buf, width=COLUMNS), wide=False)
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines) <= COLUMNS
    body = lines[next(i for i, x in enumerate(lines) if x.startswith("┡")) + 1 :]
    body = body[: next(i for i, x in enumerate(body) if x.startswith("└"))]
    assert len(body) == 12  # one line per action: nothing wrapped
    assert all("…" in line for line in body)  # long targets and ids shortened
    wide = io.StringIO()
    print_plan(plan, Console(file=wide, width=400), wide=True)
    assert "00" * 32 in wide.getvalue()  # --wide: ids and review reasons whole
    assert "the body is shown and rolled back" in wide.getvalue()
