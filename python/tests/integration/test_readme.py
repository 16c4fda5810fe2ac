"""The README is the user's guide, and it must stay true: its commands run as written.

The fenced blocks whose info string is `bash runnable` are run, in order, with bash in one temp
folder with a store of their own (the venv's `poisonwatch` first on PATH, the text unchanged), on
the small landing the first block generates: a command that fails fails the test. Blocks that need
a broker or a cluster are not marked runnable. The README's other checks need no JVM and are in
unit/test_readme_text.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.readme_blocks import runnable_blocks

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"


# ---------------------------------------------------------------------------------------------
# The runnable blocks, for real (each `poisonwatch` call starts a Spark JVM: minutes)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_runnable_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4, "the Examples, plan/apply, alerts and report blocks are runnable"
    assert "poisonwatch generate" in blocks[0][0], "the first runnable block makes the landing"
    work, home, tmp = tmp_path / "work", tmp_path / "home", tmp_path / "tmp"
    for folder in (work, home, tmp):
        folder.mkdir()
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "POISONWATCH_HOME": str(home),
        "POISONWATCH_TARGET": "local",
        "TMPDIR": str(tmp),
        "COLUMNS": "120",
    }
    env.pop("POISONWATCH_PROJECT_DIR", None)
    for number, (body, line) in enumerate(blocks, 1):
        script = tmp_path / f"block-{number}.sh"
        script.write_text(body + "\n", encoding="utf-8")
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-x", str(script)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert result.returncode == 0, (
            f"README.md line {line}: runnable block {number} failed "
            f"(exit {result.returncode}):\n{body}\n--- output (tail):\n"
            + (result.stdout + result.stderr)[-6000:]
        )
