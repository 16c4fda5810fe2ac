"""The benchmark's `serve` phase: the warm server on the benchmarked store.

After the fresh-driver phases, `poisonwatch serve` runs on the store with a landing folder of
its own and a webhook receiver on 127.0.0.1. It times the server's start; an increment newer
than the delta, from the files' arrival to the end of the cycle that ingested it, built and
evaluated the alerts (and to the webhook's first post, when it posted an incident); idle cycles;
`poisonwatch sql` answered through the server; and the server's resident memory after its
first cycle and after the last.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, NoReturn

from poisonwatch.bench.procs import java_descendants, vm_rss_mib
from poisonwatch.config import PoisonwatchError, project_root
from poisonwatch.warehouse.server import running_server

SERVE_KEYS = (
    "serve_start_s",
    "serve_attempts",
    "serve_increment_s",
    "serve_increment_build_s",
    "serve_webhook_s",
    "serve_idle_cycle_s",
    "serve_sql_s",
    "serve_rss_mb_first",
    "serve_rss_mb_last",
    "serve_cycles",
    "serve_alerts_changed",
    "serve_posts",
)
IDLE_CYCLES = 5
SQL_RUNS = 3
SQL = "select count(*) from poisonwatch.poison_messages"
WAIT_S = 3600


class _Posts(ThreadingHTTPServer):
    """The webhook receiver: the monotonic time of every post it accepted."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.arrivals: list[float] = []


class _Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.server.arrivals.append(time.monotonic())  # type: ignore[attr-defined]
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        return


@contextlib.contextmanager
def _receiver() -> Iterator[_Posts]:
    posts = _Posts()
    thread = threading.Thread(target=posts.serve_forever, name="bench-webhook", daemon=True)
    thread.start()
    try:
        yield posts
    finally:
        posts.shutdown()
        posts.server_close()


def _poisonwatch() -> list[str]:
    return [sys.executable, "-c", "import sys; from poisonwatch.cli import main; sys.exit(main())"]


def land_increment(source: Path, landing: Path) -> int:
    """Put the increment's files into the (empty) landing folder all at once: copied next to
    it, then renamed over it, so that no cycle sees half of them. Returns the newest file's
    modification time (ns)."""
    staging = landing.with_name(landing.name + ".incoming")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(source, staging)
    newest = max(p.stat().st_mtime_ns for p in staging.rglob("*") if p.is_file())
    os.rename(staging, landing)  # replaces an empty folder in one step (rename(2))
    return newest


def serve_phase(
    store: Path,
    increment: Path,
    landing: Path,
    log: Path,
    env: dict[str, str],
    data_tests: bool,
    step: Callable[[str, float | None], None],
) -> dict[str, Any]:
    """Run the server on `store` (its output to `log`), land `increment` into the empty folder
    `landing` it watches, and time it."""
    shutil.rmtree(landing, ignore_errors=True)
    landing.mkdir(parents=True)
    with _receiver() as posts, log.open("w", encoding="utf-8") as out:
        url = f"http://127.0.0.1:{posts.server_address[1]}/pw"
        started = time.monotonic()
        server = subprocess.Popen(
            [*_poisonwatch(), "serve", "--port", "0", "--landing", str(landing), "--every", "1s",
             "--webhook", url, *([] if data_tests else ["--no-data-tests"])],
            cwd=project_root(), env=env, stdin=subprocess.DEVNULL, stdout=out,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            status = _wait(server, store, log, lambda s: s.get("cycles", 0) >= 1)
            if status.get("last_error"):
                raise PoisonwatchError(f"the server's first cycle failed: {status['last_error']}")
            figures: dict[str, Any] = {"serve_start_s": round(time.monotonic() - started, 3)}
            step("serve start", figures["serve_start_s"])
            # The server's driver: the one JVM below it (none found: no figure).
            jvms = java_descendants(server.pid)
            jvm = jvms[0] if len(jvms) == 1 else None
            figures["serve_rss_mb_first"] = vm_rss_mib(jvm) if jvm else None
            figures["serve_sql_s"] = _sql_seconds(env)
            step("serve sql", figures["serve_sql_s"])
            figures.update(_increment(server, store, log, increment, landing, posts, status))
            step("serve increment", figures["serve_increment_s"])
            idle = _idle_cycles(server, store, log)
            figures["serve_idle_cycle_s"] = max(idle)
            step("serve idle cycle", figures["serve_idle_cycle_s"])
            figures["serve_rss_mb_last"] = vm_rss_mib(jvm) if jvm else None
            figures["serve_cycles"] = (running_server(store) or _gone(log)).status["cycles"]
            _stop(env)
            if server.wait(timeout=300) != 0:
                raise PoisonwatchError(f"`poisonwatch serve` exited {server.returncode}: {log}")
        finally:
            if server.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(server.pid, signal.SIGKILL)
    return figures


def _gone(log: Path) -> NoReturn:
    tail = "\n".join(log.read_text(encoding="utf-8", errors="replace").splitlines()[-30:])
    raise PoisonwatchError(f"`poisonwatch serve` is not running; last lines of {log}:\n{tail}")


def _wait(
    server: subprocess.Popen[bytes], store: Path, log: Path, ready: Callable[[dict], bool]
) -> dict[str, Any]:
    """The server's status once `ready(status)` holds between cycles; an error when a cycle
    fails meanwhile."""
    deadline = time.monotonic() + WAIT_S
    failed_before = None
    while time.monotonic() < deadline:
        if server.poll() is not None:
            _gone(log)
        found = running_server(store)
        if found is not None:
            error = found.status.get("last_error") or {}
            if failed_before is None:
                failed_before = error.get("cycle") or 0
            elif (error.get("cycle") or 0) > failed_before:
                raise PoisonwatchError(f"a `poisonwatch serve` cycle failed: {error}")
            if found.status.get("step") == "waiting" and ready(found.status):
                return found.status
        time.sleep(0.1)
    raise PoisonwatchError(f"`poisonwatch serve` was not ready within {WAIT_S} s: {log}")


def _sql_seconds(env: dict[str, str]) -> float:
    """The median wall time of `poisonwatch sql` answered through the server."""
    seconds = []
    for _ in range(SQL_RUNS):
        started = time.monotonic()
        done = subprocess.run(
            [*_poisonwatch(), "sql", SQL, "--format", "json"],
            cwd=project_root(), env={**env, "JAVA_HOME": "/nonexistent"}, capture_output=True,
            text=True, timeout=600, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise PoisonwatchError(f"`poisonwatch sql` through the server failed: {done.stderr}")
        seconds.append(time.monotonic() - started)
    return round(statistics.median(seconds), 3)


def _increment(
    server: subprocess.Popen[bytes],
    store: Path,
    log: Path,
    increment: Path,
    landing: Path,
    posts: _Posts,
    before: dict[str, Any],
) -> dict[str, Any]:
    cycles, posted = before["cycles"], len(posts.arrivals)
    newest = land_increment(increment, landing)
    started = time.monotonic()
    status = _wait(
        server,
        store,
        log,
        lambda s: (
            int((s.get("last_cycle") or {}).get("landing_newest_mtime_ns") or 0) >= newest
            and s["cycles"] > cycles
        ),
    )
    done = time.monotonic() - started
    last = status["last_cycle"]
    if last.get("build_seconds") is None:
        raise PoisonwatchError(f"the server's cycle after the increment built nothing: {last}")
    arrivals = posts.arrivals[posted:]
    return {
        "serve_attempts": last["attempts"],
        "serve_alerts_changed": last["alerts_new"] + last["alerts_resolved"],
        "serve_posts": last.get("incident_posts", 0),
        "serve_increment_s": round(done, 3),
        "serve_increment_build_s": round(last["build_seconds"], 3),
        "serve_webhook_s": round(arrivals[0] - started, 3) if arrivals else None,
    }


def _idle_cycles(server: subprocess.Popen[bytes], store: Path, log: Path) -> list[float]:
    """The seconds of the next IDLE_CYCLES cycles, each of which must find nothing new."""
    seconds: list[float] = []
    seen = _wait(server, store, log, lambda s: True)["cycles"]
    while len(seconds) < IDLE_CYCLES:
        status = _wait(server, store, log, lambda s, n=seen: s["cycles"] > n)
        last = status["last_cycle"]
        if not last.get("is_idle"):
            raise PoisonwatchError(f"a cycle with nothing landed was not idle: {last}")
        seconds.append(float(last["seconds"]))
        seen = status["cycles"]
    return seconds


def _stop(env: dict[str, str]) -> None:
    done = subprocess.run(
        [*_poisonwatch(), "serve", "--stop"], cwd=project_root(), env=env,
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise PoisonwatchError(f"`poisonwatch serve --stop` failed: {done.stdout}{done.stderr}")


def serve_rows(entries: list[dict[str, Any]]) -> list[list[str]]:
    """One row per size with serve figures, for the table in results.md."""

    def cell(value: Any, spec: str = ".1f") -> str:
        return "–" if value is None else format(value, spec)

    return [
        [
            format(e["attempts"], ","),
            format(e["serve_attempts"], ","),
            cell(e["serve_start_s"]),
            cell(e["serve_increment_s"]),
            cell(e["serve_increment_build_s"]),
            cell(e.get("serve_webhook_s")),
            cell(e["serve_idle_cycle_s"], ".2f"),
            cell(e["serve_sql_s"], ".2f"),
            cell(e.get("serve_rss_mb_first"), ".0f"),
            cell(e.get("serve_rss_mb_last"), ".0f"),
            str(e["serve_cycles"]),
        ]
        for e in entries
        if e.get("serve_increment_s") is not None
    ]


SERVE_COLUMNS = (
    "attempts",
    "new attempts",
    "start s",
    "files → marts s",
    "build s",
    "→ webhook s",
    "idle cycle s",
    "sql s",
    "RSS first MiB",
    "RSS last MiB",
    "cycles",
)
