"""The README is the user's guide, and it must stay true: its commands run as written.

The fenced blocks whose info string is `bash runnable` are run, in order, with bash in one temp
folder with a store of their own (the venv's `poisonwatch` first on PATH, the text unchanged), on
the small landing the first block generates: a command that fails fails the test. They run while
`poisonwatch serve` runs on that store, started on it while it is still empty, with no Java to be
found: the README's "every other command finds it and starts no JVM", held to its word from the
first ingest to the report, and one driver's start instead of a dozen. (Each command in a driver
of its own is what the other modules run: ingest, build --ingest, sql, apply.) Blocks that need a
broker or a cluster are not marked runnable. The README's other checks need no JVM and are in
unit/test_readme_text.py.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.readme_blocks import runnable_blocks

from poisonwatch.warehouse.server import running_server

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
BASH = shutil.which("bash") or "/bin/bash"


def _run_block(number: int, body: str, line: int, folder: Path, env: dict[str, str]) -> None:
    script = folder / f"block-{number}.sh"
    script.write_text(body + "\n", encoding="utf-8")
    result = subprocess.run(
        [BASH, "-e", "-o", "pipefail", "-x", str(script)],
        cwd=folder / "work",
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


def _serving(server: subprocess.Popen[bytes], home: Path, log: Path) -> None:
    """Wait until the server's first cycle is done and it waits for the next."""
    deadline = time.monotonic() + 900
    while True:
        assert server.poll() is None, "serve exited:\n" + log.read_text()[-3000:]
        found = running_server(home)
        if found is not None and found.status.get("step") == "waiting":
            return
        assert time.monotonic() < deadline, "serve did not start:\n" + log.read_text()[-3000:]
        time.sleep(0.5)


# ---------------------------------------------------------------------------------------------
# The runnable blocks, for real, through one server
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
        # Models and seeds only: the data tests run in the demo's builds (scripts/test.sh).
        "POISONWATCH_DATA_TESTS": "off",
    }
    env.pop("POISONWATCH_PROJECT_DIR", None)

    log = tmp_path / "serve.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [str(venv_bin / "poisonwatch"), "serve", "--port", "0", "--every", "1h"],
            env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        _serving(server, home, log)
        # A command that started a driver now would fail: no Java under JAVA_HOME.
        served = {**env, "JAVA_HOME": str(tmp_path / "no-java")}
        for number, (body, line) in enumerate(blocks, 1):
            _run_block(number, body, line, tmp_path, served)
        stopped = subprocess.run(
            [str(venv_bin / "poisonwatch"), "serve", "--stop"],
            env=env, cwd=work, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert server.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        if server.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(server.pid, signal.SIGKILL)
