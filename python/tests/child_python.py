"""Run Python in a fresh child process (its own Spark JVM, its own POISONWATCH_HOME from `env`)
and read back the JSON it prints last on a line starting with "@@"."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def run_py(code: str, env: dict[str, str], timeout: float = 1200) -> Any:
    """Run `code` (dedented) in the project folder; fail the test when it exits non-zero."""
    # The child imports test fixtures (`fixtures.remediation`) as the tests do.
    tests_dir = str(Path(__file__).resolve().parent)
    env = {**env, "PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, env.get("PYTHONPATH")]))}
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@")]
    return json.loads(lines[-1][2:]) if lines else None


def run_in_store(
    code: str, store: Path, extra: dict[str, str] | None = None, timeout: float = 900
) -> Any:
    """Run `code` on a store of its own (target `local`, 1 GiB driver, `extra` added to the
    environment) and return the JSON it printed; fail the test when it printed none."""
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(store),
        "POISONWATCH_TARGET": "local",
        "POISONWATCH_DRIVER_MEMORY": "1g",
        **(extra or {}),
    }
    data = run_py(code, env, timeout=timeout)
    assert data is not None, "the child printed no result"
    return data
