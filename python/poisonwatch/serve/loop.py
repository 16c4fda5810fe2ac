"""The server: a Thrift server inside the runner's own Spark driver, and the cycle.

Every cycle browses the live brokers named (`--broker`, at most every `--collect-every`) into
the landing folder, lists it (no Spark when nothing changed), ingests what is new, runs the
production build as far as the new data reaches, evaluates the alerts (posting the incidents'
openings, severity changes and resolutions to the webhook) and rewrites the report. Each step
is one of the store's crash-safe commands run in this driver, so a kill -9 at any point leaves
what a killed `ingest`, `build` or `apply` leaves, and a restart carries on.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
import os
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from poisonwatch.config import (
    PoisonwatchError,
    describe_store_holder,
    home,
    load_profile,
    stop_spark,
    target_name,
)
from poisonwatch.textsafe import terminal
from poisonwatch.warehouse.server import (
    TurnCancelledError,
    mark_serving,
    read_status,
    running_server,
    status_path,
    turn,
    write_status,
)

# Hive's Thrift service reads these before its configuration, so they are cleared: the port
# is set in the configuration, and 0 is left to the kernel at the bind.
_PORT_VARIABLE = "HIVE_SERVER2_THRIFT_PORT"
_HOST_VARIABLE = "HIVE_SERVER2_THRIFT_BIND_HOST"
HOST = "127.0.0.1"
DEFAULT_PORT = 10001


@dataclass
class ServeOptions:
    port: int = DEFAULT_PORT
    every: float = 30.0
    landing: Path | None = None
    webhook: str | None = None
    report: Path | None = None
    cycles: int | None = None
    data_tests: bool | None = None  # None: POISONWATCH_DATA_TESTS decides
    # Live brokers (broker.BrokerTarget) browsed into the landing folder every collect_every s.
    brokers: list[Any] = field(default_factory=list)
    collect_every: float = 60.0


@dataclass
class CycleResult:
    number: int
    files: int = 0
    attempts: int = 0
    rejected: int = 0
    build_seconds: float | None = None
    alerts_new: int = 0
    alerts_resolved: int = 0
    collected: int | None = None
    posted: int = 0
    seconds: float = 0.0
    error: str | None = None

    @property
    def idle(self) -> bool:
        return self.error is None and not self.files and self.build_seconds is None

    def line(self) -> str:
        parts = [f"cycle {self.number}"]
        if self.collected:
            parts.append(f"collected {self.collected:,} message{'s' * (self.collected != 1)}")
        if self.idle:
            parts.append("nothing new")
        if self.files or self.build_seconds is not None:
            parts.append(f"{self.files:,} file{'s' * (self.files != 1)}")
            parts.append(f"{self.attempts:,} attempts")
            if self.rejected:
                parts.append(f"{self.rejected:,} rejected")
            if self.build_seconds is not None:
                parts.append(f"build {self.build_seconds:.1f} s")
            parts.append(f"alerts +{self.alerts_new} −{self.alerts_resolved}")
        if self.error is not None:
            parts.append(f"failed: {self.error}")
        parts.append(f"{self.seconds:.1f} s")
        return " · ".join(parts)


@dataclass
class _State:
    seen: dict[str, tuple[int, int]] = field(default_factory=dict)
    open_alerts: set[str] | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    status: dict[str, Any] = field(default_factory=dict)
    retry_posts: bool = False
    mutes: frozenset[tuple[str, str]] = frozenset()
    collected_at: float | None = None

    def step(self, name: str) -> None:
        """Say in the status file what the server is doing now."""
        if self.status:
            self.status["step"] = name
            self.status["step_started_at"] = _now()
            write_status(self.status)


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _wait_for_port(port: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((HOST, port), timeout=1):
            return
        time.sleep(0.2)
    raise PoisonwatchError(f"the Thrift server did not open {HOST}:{port} within {seconds:.0f} s")


def landing_files(landing: Path) -> dict[str, tuple[int, int]]:
    """Every file under the landing folder: relative path → (size, modification time)."""
    found: dict[str, tuple[int, int]] = {}
    for folder, _dirs, names in os.walk(landing):
        for name in names:
            path = Path(folder) / name
            with contextlib.suppress(OSError):
                info = path.stat()
                found[str(path.relative_to(landing))] = (info.st_size, info.st_mtime_ns)
    return found


def _alerts_in_mart(engine: Any) -> list[dict[str, Any]] | None:
    """The mart's alerts, or None before the first build made it."""
    from poisonwatch.alerts import load_alerts

    return load_alerts(engine) if engine.table_exists("poisonwatch", "alerts") else None


def _ingested_before(engine: Any) -> bool:
    """True when the store has the ingest ledger (an earlier run landed something)."""
    return engine.table_exists("raw", "ingested_files")


def run_cycle(engine: Any, options: ServeOptions, state: _State, number: int) -> CycleResult:
    """One cycle in this driver; steps that have nothing to do start no Spark job."""
    from poisonwatch.warehouse.build import production_build

    started = time.monotonic()
    result = CycleResult(number)
    quiet = Console(file=io.StringIO(), width=80)
    files: dict[str, tuple[int, int]] = {}
    if options.brokers and (
        state.collected_at is None or started - state.collected_at >= options.collect_every
    ):
        state.step("collect")
        state.collected_at = started
        _collect_step(options, result, quiet)
    if options.landing is not None:
        files = landing_files(options.landing)
    new = [name for name, seen in files.items() if state.seen.get(name) != seen]
    try:
        with turn(f"poisonwatch serve pid {os.getpid()}, cycle {number}", state.stopping):
            if new:
                from poisonwatch.ingest import ingest

                assert options.landing is not None
                state.step("ingest")
                summary = ingest(engine, options.landing, console=quiet)
                result.files = sum(d.files_loaded for d in summary.datasets.values())
                result.attempts = summary.dataset("ssb_receive_attempts").records_loaded + (
                    summary.dataset("jms_receive_attempts").records_loaded
                )
                result.rejected = summary.rejected_total
                state.seen = files
            if state.stopping.is_set():
                return result
            # The first cycle builds what an earlier run left unbuilt (a store with raw tables).
            if new or (number == 1 and _ingested_before(engine)):
                state.step("build")
                built = production_build(
                    engine, "local", data_tests=options.data_tests, console=quiet
                )
                if built.ran:
                    result.build_seconds = built.seconds
            if state.stopping.is_set():
                return result
            # The first cycle also posts what a killed run built but did not post; a mute
            # that ended (or began) changes what is due without new data.
            if (
                result.build_seconds is not None
                or number == 1
                or state.retry_posts
                or (options.webhook is not None and _mutes(state))
            ):
                state.step("alerts")
                has_marts = _alerts_step(engine, options, state, result)
                if has_marts and options.report is not None:
                    from poisonwatch.report import write_report

                    state.step("report")
                    write_report(engine, options.report)
    except TurnCancelledError:
        return result  # SIGTERM while another command held the turn: this cycle wrote nothing
    result.seconds = time.monotonic() - started
    return result


def _collect_step(options: ServeOptions, result: CycleResult, quiet: Console) -> None:
    """Browse each broker's queues and DLQs into the landing folder (no Spark: files only);
    a broker that cannot be reached is this cycle's error, the others are still collected."""
    from poisonwatch import broker

    assert options.landing is not None
    result.collected = 0
    problems = []
    for target in options.brokers:
        collected = broker.collect(target, [], out=options.landing, count=1, console=quiet)
        result.collected += collected.messages
        if collected.error:
            problems.append(f"collect {terminal(target.name)}: {terminal(collected.error)}")
    if problems:
        result.error = "; ".join(problems)


def _mutes(state: _State) -> bool:
    """True when the running mutes differ from those of the last alerts step."""
    from poisonwatch.alerts import active_mutes, mutes_path, now_utc

    return frozenset(active_mutes(mutes_path(), now_utc())) != state.mutes


def _alerts_step(engine: Any, options: ServeOptions, state: _State, result: CycleResult) -> bool:
    """Count the alerts and post the incidents' due events; False when no build has made the
    marts yet."""
    from poisonwatch.alerts import (
        active_mutes,
        ledger_path,
        load_incidents,
        mutes_path,
        now_utc,
        post_incident_events,
    )

    alerts = _alerts_in_mart(engine)
    if alerts is None:
        return False
    now_open = {a["alert_id"] for a in alerts if a["status"] == "open"}
    before = state.open_alerts if state.open_alerts is not None else set()
    result.alerts_new = len(now_open - before)
    result.alerts_resolved = len(before - now_open)
    state.open_alerts = now_open
    if options.webhook:
        mutes = active_mutes(mutes_path(), now_utc())
        state.mutes = frozenset(mutes)
        if not engine.table_exists("poisonwatch", "alert_incidents"):
            # A store built before incidents existed: its next build makes the mart.
            state.retry_posts = False
            result.error = "webhook: no mart alert_incidents yet (the next build makes it)"
            return True
        posted, errors = post_incident_events(
            load_incidents(engine), options.webhook, ledger_path(), mutes
        )
        result.posted = len(posted)
        # A refused post is tried again next cycle; the cycle carries on to the report.
        state.retry_posts = bool(errors)
        if errors:
            result.error = "webhook: " + "; ".join(errors[:3])
    return True


def _start_thrift(spark: Any, port: int) -> tuple[Any, int]:
    """Start Thrift on `port`, or on a port the kernel chooses at the bind when it is 0;
    returns (server, the port it listens on)."""
    # Thrift reads the configuration of this thread's Hive session (the one the metastore
    # client opened); without one, a new session's, made from the context's.
    state = spark._jvm.org.apache.hadoop.hive.ql.session.SessionState.get()
    conf = state.getConf() if state is not None else spark._jsc.sc().conf()
    conf.set("hive.server2.thrift.bind.host", HOST)
    conf.set("hive.server2.thrift.port", str(port))
    server = spark._jvm.org.apache.spark.sql.hive.thriftserver.HiveThriftServer2.startWithContext(
        spark._jsparkSession.sqlContext()
    )
    bound = [
        int(service.getPortNumber())
        for service in server.getServices()
        if service.getClass().getSimpleName().startswith("Thrift")
    ]
    if len(bound) != 1 or (port and bound[0] != port):
        server.stop()
        raise PoisonwatchError(f"the Thrift server was asked for port {port} and bound {bound}")
    return server, bound[0]


def run_serve(options: ServeOptions, console: Console | None = None) -> int:
    """`poisonwatch serve`: run until SIGTERM/SIGINT (or `options.cycles`); returns 0."""
    from poisonwatch.warehouse.engine import LocalEngine

    console = console or Console(width=80)
    name = target_name(None)
    if load_profile(name).get("method") != "session":
        raise PoisonwatchError(
            f"target {name!r}: `poisonwatch serve` runs on the embedded store (target `local`)"
        )
    other = running_server()
    if other is not None:
        raise PoisonwatchError(
            f"`poisonwatch serve` already runs on this store (pid {other.pid}, "
            f"{other.host}:{other.port})"
        )
    if options.landing is not None and not options.landing.is_dir():
        raise PoisonwatchError(f"--landing {options.landing}: no such folder")
    if options.port:
        # Found before the JVM starts, with a message of ours rather than Hive's stack trace.
        try:
            with socket.socket() as sock:
                sock.bind((HOST, options.port))
        except OSError as exc:
            raise PoisonwatchError(
                f"--port {options.port}: {HOST}:{options.port} is in use ({exc.strerror}); "
                "choose another, or --port 0 for any free one"
            ) from None
    os.environ.pop(_PORT_VARIABLE, None)
    os.environ.pop(_HOST_VARIABLE, None)
    mark_serving()
    state = _State()

    def stop(signum: int, _frame: Any) -> None:
        # From another thread: the handler runs in the main thread, which may hold the
        # event's lock inside stopping.wait(), and that lock is not re-entrant.
        threading.Thread(target=state.stopping.set, name="serve-stop", daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    engine = LocalEngine(name)
    # The store's lock is ours now: a status file left is a killed server's.
    status_path().unlink(missing_ok=True)
    server, port = _start_thrift(engine.spark, options.port)
    _wait_for_port(port)
    holder = (
        f"`poisonwatch serve` pid {os.getpid()}, serving it on {HOST}:{port} (a command that "
        "needs the store to itself runs after `poisonwatch serve --stop`)"
    )
    describe_store_holder(holder)
    status: dict[str, Any] = {
        "pid": os.getpid(),
        "host": HOST,
        "port": port,
        "store": str(home()),
        "started_at": _now(),
        "landing": str(options.landing.resolve()) if options.landing else None,
        "every_seconds": options.every,
        "cycles": 0,
        "last_cycle": None,
        "last_error": None,
        "step": "starting",
    }
    state.status = status
    write_status(status)
    # Alerts open at the start are not new: the cycle line counts changes from here.
    opened = _alerts_in_mart(engine)
    if opened is not None:
        state.open_alerts = {a["alert_id"] for a in opened if a["status"] == "open"}
    console.print(f"poisonwatch serve: pid {os.getpid()}, Thrift on {HOST}:{port}")
    number = 0
    previous_idle = False
    try:
        while not state.stopping.is_set():
            number += 1
            cycle_started, clock = _now(), time.monotonic()
            try:
                result = run_cycle(engine, options, state, number)
            except Exception as exc:  # a failed cycle is reported; the next one tries again
                text = " ".join(str(exc).split())[:500]
                result = CycleResult(number, error=text, seconds=time.monotonic() - clock)
            if result.error is not None:
                status["last_error"] = {"cycle": number, "at": _now(), "message": result.error}
            status["cycles"] = number
            status["step"], status["step_started_at"] = "waiting", _now()
            status["last_cycle"] = {
                "number": number,
                "started_at": cycle_started,
                "ended_at": _now(),
                "line": result.line(),
                "landing_newest_mtime_ns": max((m for _, m in state.seen.values()), default=0),
                # The line's figures, for a supervisor or the benchmark to read.
                "seconds": round(result.seconds, 3),
                "build_seconds": result.build_seconds,
                "files": result.files,
                "attempts": result.attempts,
                "alerts_new": result.alerts_new,
                "alerts_resolved": result.alerts_resolved,
                "collected": result.collected,
                "incident_posts": result.posted,
                "is_idle": result.idle,
            }
            write_status(status)
            # Idle cycles after the first are counted in the status file, not printed.
            if not (result.idle and previous_idle):
                console.print(terminal(result.line()))
            previous_idle = result.idle
            if options.cycles is not None and number >= options.cycles:
                break
            state.stopping.wait(options.every)
    finally:
        with contextlib.suppress(Exception):
            server.stop()
        status_path().unlink(missing_ok=True)
        stop_spark()
    console.print(f"poisonwatch serve: stopped after {number} cycle(s)")
    return 0


def print_status(fmt: str = "table", console: Console | None = None) -> int:
    """`poisonwatch serve --status`: 0 when a server runs on the store, 3 when none does."""
    console = console or Console(width=80)
    server = running_server()
    status = server.status if server is not None else read_status()
    landing = status.get("landing") if server is not None and status else None
    lag = None
    if landing and Path(landing).is_dir():
        # How long the oldest file newer than everything ingested has waited.
        seen = int((status.get("last_cycle") or {}).get("landing_newest_mtime_ns") or 0)
        waiting = [m for _, m in landing_files(Path(landing)).values() if m > seen]
        lag = max(0.0, time.time() - min(waiting) / 1e9) if waiting else 0.0
    if fmt == "json":
        print(json.dumps({"running": server is not None, "lag_seconds": lag, **(status or {})}))
        return 0 if server is not None else 3
    if server is None:
        console.print(f"poisonwatch serve: not running on {home()}")
        return 3
    last = status.get("last_cycle") or {}
    error = status.get("last_error") or {}
    console.print(f"poisonwatch serve: running, pid {server.pid}, {server.host}:{server.port}")
    console.print(f"  since       {status.get('started_at')}")
    console.print(
        f"  now         {status.get('step', '-')} (since {status.get('step_started_at', '-')})"
    )
    console.print(f"  last cycle  {terminal(str(last.get('line', 'none yet')))}")
    console.print(f"  ended at    {last.get('ended_at', '-')}")
    if lag is not None:
        console.print(f"  lag         {lag:.0f} s behind the landing folder")
    if error:
        console.print(
            f"  last error  cycle {error.get('cycle')} at {error.get('at')}: "
            f"{terminal(str(error.get('message')))}"
        )
    return 0


def stop_server(timeout: float = 120, console: Console | None = None) -> int:
    """`poisonwatch serve --stop`: SIGTERM the server and wait until it has let the store go."""
    console = console or Console(width=80)
    server = running_server()
    if server is None:
        console.print(f"poisonwatch serve: not running on {home()}")
        return 0
    os.kill(server.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while running_server() is not None:
        if time.monotonic() > deadline:
            raise PoisonwatchError(
                f"`poisonwatch serve` (pid {server.pid}) did not stop within {timeout:.0f} s"
            )
        time.sleep(0.5)
    console.print(f"poisonwatch serve: pid {server.pid} stopped")
    return 0
