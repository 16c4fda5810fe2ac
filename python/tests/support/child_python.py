"""Run Python in a child process (its own Spark JVM, its own POISONWATCH_HOME) and read back
the JSON it prints last on a line starting with "@@": `run_py` starts a fresh child per call;
`SharedChild` keeps one child and its store for many scripts (conftest.py's `shared_store`)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[3]


def with_tests_on_path(env: dict[str, str]) -> dict[str, str]:
    """`env` with the tests folder on PYTHONPATH: a child imports test fixtures
    (`support.fixtures.remediation`, `support.child_dbt`) as the tests do."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    return {**env, "PYTHONPATH": os.pathsep.join(filter(None, [tests_dir, env.get("PYTHONPATH")]))}


def last_result(stdout: str) -> Any:
    """The JSON of the last line starting with "@@", or None when there is none."""
    lines = [ln for ln in stdout.splitlines() if ln.startswith("@@")]
    return json.loads(lines[-1][2:]) if lines else None


def run_py(code: str, env: dict[str, str], timeout: float = 1200) -> Any:
    """Run `code` (dedented) in the project folder; fail the test when it exits non-zero."""
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=with_tests_on_path(env),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    return last_result(proc.stdout)


# Several commands in one child: each `main(ARGS)` as `poisonwatch ARGS` runs it, with what it
# prints to sys.stdout and sys.stderr captured, and its exit code.
CLI_CALLS = """
import contextlib, io, json
from poisonwatch.cli import main
out = []
for args in CALLS:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    out.append([args, code, stdout.getvalue(), stderr.getvalue()])
print("@@" + json.dumps(out))
"""


def run_cli_calls(
    calls: list[list[str]], env: dict[str, str]
) -> list[subprocess.CompletedProcess[str]]:
    """`poisonwatch ARGS` for each of `calls`, one after another in one child process and one
    Spark JVM, for tests of what commands print (a JVM start per command would prove nothing
    more). The JVM's own output is not among what is captured."""
    result = run_py(f"CALLS = {calls!r}\n" + CLI_CALLS, env)
    assert result is not None, "the child printed no result"
    return [subprocess.CompletedProcess(a, code, out, err) for a, code, out, err in result]


def run_cli(args: list[str], env: dict[str, str], crash_at: str | None = None) -> str:
    """`poisonwatch ARGS` as a user runs it, in its own process group; with `crash_at`, killed
    with SIGKILL at that crash point (config.crash_point), which the test then expects. Returns
    what it printed."""
    env = {
        k: v for k, v in env.items() if k not in ("POISONWATCH_CRASH_AT", "POISONWATCH_PAUSE_AT")
    }
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "poisonwatch"), *args],
        env={**env, "POISONWATCH_CRASH_AT": crash_at} if crash_at else env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=600)
    finally:
        # A killed run's JVM ends when its driver's pipe closes; its group goes in any case.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == (-signal.SIGKILL if crash_at else 0), output
    return output


# The shared child's loop: one request per stdin line ({"code", "env"}), one reply per request
# on a stdout line starting with REPLY ({"stdout", "error"}). A script's own prints are
# captured (the JVM's own output, which bypasses sys.stdout, is skipped by the reader).
REPLY = "@@pw-shared-child@@"
SERVER = f"""
import contextlib, io, json, os, sys, traceback
reply = sys.stdout
for line in sys.stdin:
    request = json.loads(line)
    saved = {{k: os.environ.get(k) for k in request["env"]}}
    os.environ.update(request["env"])
    captured, error = io.StringIO(), None
    try:
        with contextlib.redirect_stdout(captured):
            exec(compile(request["code"], "<test script>", "exec"), {{"__name__": "__main__"}})
    except BaseException:
        error = traceback.format_exc()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    reply.write({REPLY!r} + json.dumps({{"stdout": captured.getvalue(), "error": error}}) + "\\n")
    reply.flush()
"""


class SharedChild:
    """One child process (one Spark JVM, one dbt project parse) that runs the scripts of several
    test modules, one after another, on one store (target `local`, 1 GiB driver). Each
    script's `extra` environment is set for it alone. For scripts that build small fixtures
    in databases and temp views of their own names and compile macros: a child per module
    would cost a JVM start, a Python start and a full dbt parse each."""

    def __init__(self, store: Path) -> None:
        self.store = store
        self.log_path = store.parent / f"{store.name}-child.log"  # the child's stderr
        self.proc: subprocess.Popen[str] | None = None
        self.log: IO[str] | None = None

    def _start(self) -> subprocess.Popen[str]:
        env = {
            **os.environ,
            "POISONWATCH_HOME": str(self.store),
            "POISONWATCH_TARGET": "local",
            "POISONWATCH_DRIVER_MEMORY": "1g",
        }
        if self.log is not None:
            self.log.close()
        self.log = open(self.log_path, "a")  # noqa: SIM115
        return subprocess.Popen(
            [sys.executable, "-u", "-c", SERVER],
            env=with_tests_on_path(env),
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
        )

    def run(self, code: str, extra: dict[str, str] | None = None, timeout: float = 900) -> Any:
        """Run `code` (dedented) and return the JSON it printed; fail the test when it raised
        or printed none. A child that died is started again (same store)."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        request = {"code": textwrap.dedent(code), "env": extra or {}}
        proc.stdin.write(json.dumps(request) + "\n")
        proc.stdin.flush()
        watchdog = threading.Timer(timeout, proc.kill)
        watchdog.start()
        try:
            reply = None
            for line in proc.stdout:
                if line.startswith(REPLY):
                    reply = json.loads(line[len(REPLY) :])
                    break
        finally:
            watchdog.cancel()
        assert reply is not None, f"the shared child exited ({proc.poll()}): {self._log_tail()}"
        assert reply["error"] is None, reply["stdout"][-3000:] + reply["error"][-5000:]
        data = last_result(reply["stdout"])
        assert data is not None, "the script printed no result"
        return data

    def _log_tail(self) -> str:
        if not self.log_path.is_file():
            return ""
        return self.log_path.read_text(errors="replace")[-5000:]

    def close(self) -> None:
        """End the child (its JVM exits with it) and wait for it."""
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.log is not None:
            self.log.close()
