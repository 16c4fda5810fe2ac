"""The terminal where Spark answers: a bad query says what Spark said, without a traceback (the
rest of the terminal's checks need no JVM: unit/test_terminal.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from support.terminal_screen import COLUMNS


def test_a_bad_query_says_what_spark_said_without_a_traceback(tmp_path: Path) -> None:
    """`poisonwatch sql` with a typo: exit 2, Spark's error class and the table's name, inert
    (the name carries markup), and no Python traceback or query plan."""
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(tmp_path / "store"),
        "POISONWATCH_TARGET": "local",
        "COLUMNS": str(COLUMNS),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "poisonwatch.cli", "sql", "select * from `[red]nope[/red]`"],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "TABLE_OR_VIEW_NOT_FOUND" in proc.stderr, proc.stderr
    assert "[red]nope[/red]" in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr and "Project" not in proc.stderr, proc.stderr
