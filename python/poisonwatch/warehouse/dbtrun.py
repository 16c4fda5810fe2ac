"""Run dbt from the runner, in this process, so it shares the runner's SparkSession.

dbt-spark's `session` method calls `SparkSession.builder.getOrCreate()`, which returns the session
this process already has: one JVM, one Derby connection, no "store busy" between steps.

The terminal gets one live status line (nodes done / total, the node running, elapsed time) and
then one summary line; dbt's whole log goes to `$POISONWATCH_HOME/logs/dbt/dbt.log` only. When
the run fails, the failing nodes and their errors are printed with the log's path.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from poisonwatch import textsafe
from poisonwatch.config import PoisonwatchError, home, load_profile, project_root, target_name
from poisonwatch.warehouse.server import PORT_ENV, running_server, turn

FAILED_STATUSES = {"error", "fail", "runtime error"}
# Read by macros/utils/changed_since_bound.sql: the stamp after which a build's incremental
# models read their upstreams (and its scoped data tests check rows). Only `poisonwatch build`
# passes one (warehouse/build.py), with the newest landing batch it had seen, after which the
# landing data's scoped tests check rows (macros/testing/test_scope_filter.sql).
CHANGED_SINCE_ENV = "POISONWATCH_CHANGED_SINCE"
BATCHES_SINCE_ENV = "POISONWATCH_BATCHES_SINCE"
# How the models stamp the rows they write (run_started_at.strftime in models/), and so the
# stamp's one spelling here.
STAMP_FORMAT = "%Y-%m-%d %H:%M:%S"


def last_invocation_stamp() -> str | None:
    """`run_started_at` of this process's last dbt invocation as the incremental models stamp
    the rows they write (`sequenced_at`, `rewritten_at`: 'yyyy-MM-dd HH:mm:ss', UTC); None
    before the first."""
    from dbt import tracking

    started = getattr(tracking.active_user, "run_started_at", None)
    return started.strftime(STAMP_FORMAT) if started is not None else None


def target_path() -> Path:
    """dbt's target folder for runs from here (manifest, run_results.json), inside the store."""
    return home() / "dbt_target"


PARSE_FILE = "partial_parse.msgpack"


def parse_cache(target: str) -> Path:
    """The project's last parse for `target`, kept in the virtualenv (one per checkout), from
    which a store without one starts: dbt checks it against the project's files, version,
    variables and profile, and parses only what differs."""
    checkout = hashlib.sha256(str(project_root()).encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "poisonwatch" / "dbt-parse" / checkout / target / PARSE_FILE


def _start_from_cached_parse(target: str) -> None:
    mine, cached = target_path() / PARSE_FILE, parse_cache(target)
    if mine.exists() or not cached.is_file():
        return
    try:
        mine.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, mine)  # with its time: _keep_parse sees whether dbt rewrote it
    except OSError:
        pass  # a cache: without it dbt parses the whole project


def _keep_parse(target: str, args: Sequence[str]) -> None:
    """Keep this store's parse for the next new store; not one made with --vars of a run's own,
    which the next store would parse again."""
    mine, cached = target_path() / PARSE_FILE, parse_cache(target)
    if "--vars" in args or not mine.is_file():
        return
    try:
        # dbt rewrites the file only when it parsed something: an unchanged one is the cache's.
        if cached.is_file() and mine.stat().st_mtime_ns <= cached.stat().st_mtime_ns:
            return
        cached.parent.mkdir(parents=True, exist_ok=True)
        # Written beside and renamed, so a reader in another process sees the old or the new one.
        partial = cached.with_name(f"{PARSE_FILE}.{os.getpid()}.tmp")
        shutil.copy2(mine, partial)
        os.replace(partial, cached)
    except OSError:
        pass


def dbt_log_path() -> Path:
    """Where dbt writes its full log for runner-started builds."""
    return home() / "logs" / "dbt" / "dbt.log"


@dataclass
class _Tracker:
    """Follows dbt's events (they arrive on dbt's worker threads) for the status line."""

    progress: Progress | None
    task: Any = None
    total: int = 0
    done: int = 0
    running: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __call__(self, msg: Any) -> None:
        name = msg.info.name
        if name not in ("LogStartLine", "NodeStart", "NodeFinished"):
            return
        with self.lock:
            if name == "LogStartLine" and msg.data.total:
                self.total = int(msg.data.total)
            node = msg.data.node_info.node_name if hasattr(msg.data, "node_info") else ""
            if name == "NodeStart" and node:
                self.running.append(node)
            elif name == "NodeFinished":
                self.done += 1
                if node in self.running:
                    self.running.remove(node)
            if self.progress is not None:
                current = self.running[-1] if self.running else ""
                more = f" +{len(self.running) - 1}" if len(self.running) > 1 else ""
                self.progress.update(
                    self.task,
                    total=self.total or None,
                    completed=self.done,
                    node=textsafe.terminal(current, 40) + more,
                )


def _failures(result: Any) -> list[tuple[str, str, str]]:
    """(node, status, message) of every node that failed or errored."""
    out = []
    for r in getattr(getattr(result, "result", None), "results", None) or []:
        status = str(getattr(r.status, "value", r.status)).lower()
        if status in FAILED_STATUSES:
            node = getattr(getattr(r, "node", None), "unique_id", "?")
            out.append((node, status, (r.message or "").strip()))
    return out


def run_dbt(
    args: Sequence[str],
    target: str | None = None,
    console: Console | None = None,
    label: str | None = None,
    quiet: bool = False,
    changed_since: str | None = None,
    batches_since: str | None = None,
) -> int:
    """Run `dbt <args>` against this project with a live status line; return the node count.

    `changed_since`: the stamp the incremental models read after, and `batches_since` the
    landing batch, after which the scoped data tests check rows (POISONWATCH_CHANGED_SINCE and
    POISONWATCH_BATCHES_SINCE for this invocation only; without them the variables are unset,
    whatever the caller's environment says: the models take their own rows' newest stamp and
    the tests check every row).

    `quiet`: no summary line (the caller prints its own). Raises PoisonwatchError naming the
    failing nodes, their errors and the log file when dbt fails.
    """
    from dbt.cli.main import dbtRunner

    root = project_root()
    home()  # exports POISONWATCH_HOME for the profile dbt renders
    name = target_name(target)
    # While `poisonwatch serve` owns the embedded store, dbt runs through its Thrift port
    # (profiles.yml's `serve` output), between the server's cycles.
    served = running_server() if load_profile(name).get("method") == "session" else None
    if served is not None:
        os.environ[PORT_ENV] = str(served.port)
        name = "serve"
    console = console or Console(stderr=True)
    title = label or f"dbt {' '.join(args)}"
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
        str(dbt_log_path().parent),
        "--target-path",
        str(target_path()),
        # Nothing on the terminal but our status line; everything in the log file.
        "--log-level",
        "none",
        "--log-level-file",
        "debug",
    ]
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(bar_width=20),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TextColumn("[dim]{task.fields[node]}"),
        console=console,
        transient=True,
    )
    tracker = _Tracker(progress)
    started = time.monotonic()
    _start_from_cached_parse(name)
    bounds = {CHANGED_SINCE_ENV: changed_since, BATCHES_SINCE_ENV: batches_since}
    before = {variable: os.environ.pop(variable, None) for variable in bounds}
    os.environ.update({var: value for var, value in bounds.items() if value is not None})
    try:
        with progress, turn(f"dbt in poisonwatch pid {os.getpid()}") if served else nullcontext():
            tracker.task = progress.add_task(title, total=None, node="parsing the project")
            result = dbtRunner(callbacks=[tracker]).invoke(full)
    finally:
        for variable, value in before.items():
            os.environ.pop(variable, None)
            if value is not None:
                os.environ[variable] = value
    elapsed = time.monotonic() - started
    _keep_parse(name, args)
    log = dbt_log_path()
    if not result.success:
        failed = _failures(result)
        lines = [f"{title} failed after {elapsed:.0f} s ({tracker.done} nodes ran)"]
        for node, status, message in failed[:10]:
            first = message.splitlines()[0] if message else ""
            lines.append(f"  {status}: {node}: {first[:300]}")
        if len(failed) > 10:
            lines.append(f"  … and {len(failed) - 10} more")
        if result.exception:
            lines.append(f"  {type(result.exception).__name__}: {str(result.exception)[:500]}")
        lines.append(f"full log: {log}")
        raise PoisonwatchError("\n".join(textsafe.neutralise(line) for line in lines))
    if not quiet:
        console.print(f"{title}: {tracker.done} nodes ok in {elapsed:.0f} s")
    return tracker.done
