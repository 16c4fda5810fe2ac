"""The terminal: help screens fit, and the screen checker used on the demo sees what it must.

The demo itself runs under `terminal_screen.py` in scripts/test.sh (it is the suite's pipeline
step, so the check costs no extra pipeline); here the checker is tested on small programs whose
faults are known, and every help text is measured.
"""

from __future__ import annotations

import sys

import pytest
from terminal_screen import COLUMNS, problems, run_in_terminal

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
