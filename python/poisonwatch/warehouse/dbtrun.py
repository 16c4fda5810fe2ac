"""Run dbt from the runner, in this process, so it shares the runner's SparkSession.

dbt-spark's `session` method calls `SparkSession.builder.getOrCreate()`, which returns the session
this process already has: one JVM, one Derby connection, no "store busy" between steps.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from poisonwatch.config import PoisonwatchError, home, project_root, target_name


def target_path() -> Path:
    """dbt's target folder for runs from here (manifest, run_results.json), inside the store."""
    return home() / "dbt_target"


def run_dbt(args: Sequence[str], target: str | None = None) -> None:
    """Run `dbt <args>` against this project; raise PoisonwatchError when it fails."""
    from dbt.cli.main import dbtRunner

    root = project_root()
    store = home()
    name = target_name(target)
    os.environ.setdefault("DBT_SEND_ANONYMOUS_USAGE_STATS", "false")
    full = [
        *args,
        "--project-dir",
        str(root),
        "--profiles-dir",
        str(root),
        "--target",
        name,
        "--log-path",
        str(store / "logs" / "dbt"),
        "--target-path",
        str(target_path()),
    ]
    result = dbtRunner().invoke(full)
    if not result.success:
        detail = f": {result.exception}" if result.exception else ""
        raise PoisonwatchError(f"dbt {' '.join(args)} failed{detail} (see the log above)")
