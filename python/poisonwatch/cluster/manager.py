"""`poisonwatch cluster start|stop|status`: Spark standalone + Thrift server on 127.0.0.1.

Everything comes from the pyspark installation (`bin/spark-class`, `bin/spark-submit`), nothing is
downloaded. The cluster keeps its own state under `$POISONWATCH_HOME/cluster/`:

    cluster/state.json     what runs where (ports, URLs, pids), written by `start`
    cluster/conf/          spark-defaults.conf (mode 0600: the cluster's shared secret) and logging
    cluster/run/*.pid      one pid file per process (master, worker-N, thrift)
    cluster/logs/*.log     the stdout/stderr of each process
    cluster/warehouse/     the cluster's Spark warehouse (Parquet tables)
    cluster/metastore_db/  the cluster's Derby metastore, opened by the Thrift server only
    cluster/work/          the workers' application folders (executor logs)

The embedded `local` target keeps its own warehouse and metastore in `$POISONWATCH_HOME`, so the
two never fight over one Derby database. Clients reach the cluster only through the Thrift server
(target `cluster` in profiles.yml, PyHive, dbt-spark `method: thrift`, beeline).

The master, the workers, their executors and the Thrift server's driver authenticate each other
with Spark's shared secret (`spark.authenticate`), a new one for each `start`, read from
conf/spark-defaults.conf (never from a command line, which every local user can read). Every
process listens on 127.0.0.1 only: the master's RPC and web UI ports, the workers' RPC and web UI
ports (the UIs without kill links), the executors' and the driver's RPC and block-manager ports,
the Thrift server's JDBC port and its application UI. The web UIs and the JDBC port have no login:
they are for the users of this machine.

Each process is started in a session of its own (its pid is its process group id); `stop` ends each
group, which takes the executors the workers forked with it, and checks that nothing is left.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from poisonwatch.config import (
    PoisonwatchError,
    check_java,
    home,
    load_profile,
    project_root,
    release_file_lock,
    take_file_lock,
)

THRIFT_CLASS = "org.apache.spark.sql.hive.thriftserver.HiveThriftServer2"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
LOOPBACK = "127.0.0.1"

# Settings of the `local` target that describe where the embedded store lives or how its one JVM is
# sized; the cluster sets its own. Every other setting (time zone, ANSI mode, partition overwrite
# mode, parser policy, ...) is copied, so the same SQL gives the same results on both targets.
_LOCAL_ONLY = {
    "spark.master",
    "spark.app.name",
    "spark.sql.warehouse.dir",
    "spark.hadoop.javax.jdo.option.ConnectionURL",
    "spark.driver.extraJavaOptions",
    "spark.driver.memory",
    "spark.local.dir",
    "spark.ui.enabled",
    "spark.ui.showConsoleProgress",
    "spark.sql.shuffle.partitions",
    "spark.sql.sources.parallelPartitionDiscovery.threshold",
}

console = Console()
err = Console(stderr=True)


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if not raw:
        return default
    try:
        return int(raw)
    except ValueError:
        raise PoisonwatchError(f"${name} must be a number, not {raw!r}") from None


@dataclass(frozen=True)
class Settings:
    """Size of the cluster and its ports (environment variables, loopback defaults)."""

    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    thrift_driver_memory: str = "2g"
    daemon_memory: str = "512m"
    master_port: int = 7077
    master_ui_port: int = 8080
    thrift_port: int = 10000
    thrift_ui_port: int = 4040
    shuffle_partitions: int = 4

    @classmethod
    def from_env(cls, workers: int | None = None) -> Settings:
        n = workers if workers is not None else _env_int("POISONWATCH_CLUSTER_WORKERS", 2)
        if n < 1:
            raise PoisonwatchError("a cluster needs at least one worker")
        return cls(
            workers=n,
            worker_cores=_env_int("POISONWATCH_WORKER_CORES", 1),
            worker_memory=os.environ.get("POISONWATCH_WORKER_MEMORY", "1g"),
            thrift_driver_memory=os.environ.get("POISONWATCH_THRIFT_DRIVER_MEMORY", "2g"),
            daemon_memory=os.environ.get("POISONWATCH_DAEMON_MEMORY", "512m"),
            master_port=_env_int("POISONWATCH_MASTER_PORT", 7077),
            master_ui_port=_env_int("POISONWATCH_MASTER_UI_PORT", 8080),
            thrift_port=_thrift_endpoint()[1],
            thrift_ui_port=_env_int("POISONWATCH_THRIFT_UI_PORT", 4040),
            shuffle_partitions=_env_int(
                "POISONWATCH_CLUSTER_SHUFFLE_PARTITIONS",
                2 * n * _env_int("POISONWATCH_WORKER_CORES", 1),
            ),
        )


def _thrift_endpoint() -> tuple[str, int]:
    """Host and port of target `cluster` in profiles.yml: where `start` puts the Thrift server."""
    profile = load_profile("cluster")
    host, port = str(profile["host"]), int(profile.get("port", 10000))
    if host not in (LOOPBACK, "localhost"):
        raise PoisonwatchError(
            f"target `cluster` points at {host}:{port}; `poisonwatch cluster` runs a local "
            f"cluster on {LOOPBACK} only. Unset POISONWATCH_THRIFT_HOST to use it."
        )
    return LOOPBACK, port


@dataclass
class Proc:
    name: str
    pid: int
    start_ticks: int
    log: str
    command: list[str]


@dataclass
class State:
    started_at: float
    workers: int
    master_url: str
    master_ui: str
    thrift_host: str
    thrift_port: int
    thrift_ui: str
    jdbc_url: str
    startup_seconds: float | None = None
    processes: list[Proc] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> State | None:
        if not path.is_file():
            return None
        data = json.loads(path.read_text())
        procs = [Proc(**p) for p in data.pop("processes", [])]
        return cls(**data, processes=procs)

    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)


class Layout:
    """The folders of the cluster under $POISONWATCH_HOME/cluster."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or (home() / "cluster")
        self.run = self.root / "run"
        self.logs = self.root / "logs"
        self.work = self.root / "work"
        self.tmp = self.root / "tmp"
        self.conf = self.root / "conf"
        self.warehouse = self.root / "warehouse"
        self.metastore = self.root / "metastore_db"
        self.hive = self.root / "hive"
        self.state_file = self.root / "state.json"

    def create(self) -> None:
        for d in (self.run, self.logs, self.work, self.tmp, self.conf, self.warehouse):
            d.mkdir(parents=True, exist_ok=True)
        for sub in ("scratch", "local-scratch", "resources", "operation_logs"):
            (self.hive / sub).mkdir(parents=True, exist_ok=True)

    def state(self) -> State | None:
        return State.load(self.state_file)


# --- processes -----------------------------------------------------------------------------------


def spark_home() -> Path:
    """The pyspark installation: it ships bin/spark-class, bin/spark-submit and the jars."""
    import pyspark

    path = Path(pyspark.__file__).resolve().parent
    for rel in ("bin/spark-class", "bin/spark-submit", "bin/beeline"):
        if not (path / rel).is_file():
            raise PoisonwatchError(f"pyspark at {path} has no {rel}; reinstall pyspark")
    jars = list((path / "jars").glob("spark-hive-thriftserver_*.jar"))
    if not jars:
        raise PoisonwatchError(
            f"pyspark at {path} has no spark-hive-thriftserver jar: the Thrift server is missing"
        )
    return path


def _start_ticks(pid: int) -> int | None:
    """The process start time (clock ticks since boot), or None when no such process exists.

    Saved with each pid, so a pid that the system has since given to another process is not ours.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # Field 2 (comm) may hold spaces and parentheses: split after the last ')'.
    fields = stat[stat.rindex(")") + 2 :].split()
    if fields[0] == "Z":  # a zombie has ended; only its exit status is left
        return None
    return int(fields[19])


def is_alive(proc: Proc) -> bool:
    return _start_ticks(proc.pid) == proc.start_ticks


def _group_members(pgid: int) -> list[int]:
    """Live pids whose process group is `pgid` (a started process and everything it forked)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(entry.name))
    return members


def _processes_under(root: Path) -> list[int]:
    """Live Java processes whose working directory is inside `root` (e.g. executors in work/).

    Only JVMs count: a shell someone opened in the folder is not part of the cluster.
    """
    found = []
    prefix = str(root.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if os.path.basename(os.readlink(entry / "exe")) != "java":
                continue
            cwd = os.readlink(entry / "cwd")
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if stat[stat.rindex(")") + 2 :].split()[0] == "Z":
            continue
        if cwd == prefix or cwd.startswith(prefix + "/"):
            found.append(int(entry.name))
    return found


def leftover_pids(layout: Layout | None = None, state: State | None = None) -> list[int]:
    """Live processes of this cluster: its process groups and JVMs working in its folder."""
    layout = layout or Layout()
    state = state or layout.state()
    pids: set[int] = set()
    if state:
        for p in state.processes:
            if is_alive(p):
                pids.add(p.pid)
            pids.update(_group_members(p.pid))
    if layout.root.is_dir():
        pids.update(_processes_under(layout.root))
    return sorted(pids)


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def _port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex((LOOPBACK, port)) == 0


def _master_json(settings_or_ui: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{settings_or_ui}/json/", timeout=3) as resp:
            return json.loads(resp.read().decode())
    except (OSError, ValueError):
        return None


_LOG4J = """\
# Written by `poisonwatch cluster start`: every cluster process logs INFO to its own log file.
rootLogger.level = info
rootLogger.appenderRef.stdout.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
logger.datanucleus.name = DataNucleus
logger.datanucleus.level = warn
logger.hive_metastore.name = org.apache.hadoop.hive.metastore
logger.hive_metastore.level = warn
"""


def caller_spark_defaults(layout: Layout) -> Path | None:
    """The `spark-defaults.conf` of the caller's `$SPARK_CONF_DIR` (the user's Spark settings,
    the commands' driver reads it too), when there is one and it is not this cluster's own."""
    folder = os.environ.get("SPARK_CONF_DIR")
    if not folder or Path(folder).resolve() == layout.conf.resolve():
        return None
    path = Path(folder) / "spark-defaults.conf"
    return path if path.is_file() else None


def write_spark_defaults(layout: Layout, inherited: Path | None = None) -> Path:
    """conf/spark-defaults.conf with a new shared secret, readable by its owner only. Master,
    workers and spark-submit all read it from SPARK_CONF_DIR; the workers hand the secret to
    their executors in the environment. `inherited`: a spark-defaults.conf whose settings come
    first (JVM options of the driver and executors, SQL settings), the cluster's own after them,
    so they win."""
    layout.conf.mkdir(parents=True, exist_ok=True)
    layout.conf.chmod(0o700)
    path = layout.conf / "spark-defaults.conf"
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        if inherited is not None:
            fh.write(f"# From {inherited}:\n")
            fh.write(inherited.read_text(encoding="utf-8").rstrip("\n") + "\n")
        fh.write(
            "# Written by `poisonwatch cluster start`: every process of this cluster, and only\n"
            "# they, hold this secret.\n"
            "spark.authenticate true\n"
            f"spark.authenticate.secret {secrets.token_hex(32)}\n"
            "spark.ui.killEnabled false\n"
        )
    tmp.replace(path)
    return path


def _base_env(layout: Layout, settings: Settings, sh: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "SPARK_HOME": str(sh),
            "SPARK_CONF_DIR": str(layout.conf),
            "SPARK_LOCAL_IP": LOOPBACK,
            "SPARK_MASTER_HOST": LOOPBACK,
            "SPARK_PUBLIC_DNS": LOOPBACK,
            "SPARK_LOCAL_DIRS": str(layout.tmp),
            "SPARK_WORKER_DIR": str(layout.work),
            "SPARK_LOG_DIR": str(layout.logs),
            "SPARK_PID_DIR": str(layout.run),
            "SPARK_DAEMON_MEMORY": settings.daemon_memory,
            # No REST submission server: clients come through the Thrift server only.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_NO_DAEMONIZE": "1",
        }
    )
    return env


def _launch(name: str, command: list[str], env: dict[str, str], layout: Layout) -> Proc:
    log = layout.logs / f"{name}.log"
    with open(log, "ab") as out:
        out.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} {name}\n".encode())
        out.flush()
        popen = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=layout.root,
            start_new_session=True,  # its own process group: `stop` ends it with its children
        )
    ticks = _start_ticks(popen.pid)
    if ticks is None:
        raise PoisonwatchError(f"{name} exited at once; see {log}")
    (layout.run / f"{name}.pid").write_text(f"{popen.pid}\n")
    return Proc(name=name, pid=popen.pid, start_ticks=ticks, log=str(log), command=command)


def thrift_conf(layout: Layout, settings: Settings, master_url: str) -> dict[str, str]:
    """The Thrift server's Spark settings: `local`'s SQL semantics, the cluster's own places."""
    local = load_profile("local").get("server_side_parameters") or {}
    conf = {str(k): str(v) for k, v in local.items() if str(k) not in _LOCAL_ONLY}
    conf.update(
        {
            "spark.master": master_url,
            "spark.app.name": "poisonwatch-thrift",
            "spark.sql.catalogImplementation": "hive",
            "spark.sql.warehouse.dir": str(layout.warehouse),
            "spark.hadoop.javax.jdo.option.ConnectionURL": (
                f"jdbc:derby:;databaseName={layout.metastore};create=true"
            ),
            "spark.driver.host": LOOPBACK,
            "spark.driver.bindAddress": LOOPBACK,
            "spark.local.dir": str(layout.tmp),
            # The executors read and write Delta tables too.
            "spark.executor.extraClassPath": local.get("spark.driver.extraClassPath", ""),
            "spark.executor.memory": settings.worker_memory,
            "spark.executor.cores": str(settings.worker_cores),
            "spark.cores.max": str(settings.workers * settings.worker_cores),
            "spark.sql.shuffle.partitions": str(settings.shuffle_partitions),
            "spark.ui.enabled": "true",
            "spark.ui.port": str(settings.thrift_ui_port),
            "spark.ui.showConsoleProgress": "false",
            # dbt-spark asks for ANSI off on every connection; make it the server default too so
            # beeline and PyHive sessions see the same semantics as dbt.
            "spark.sql.ansi.enabled": "false",
        }
    )
    return conf


@contextlib.contextmanager
def _cluster_lock(layout: Layout) -> Iterator[None]:
    layout.root.mkdir(parents=True, exist_ok=True)
    fh, holder = take_file_lock(layout.root / ".lock", f"pid {os.getpid()}")
    if fh is None:
        raise PoisonwatchError(
            f"another `poisonwatch cluster` command ({holder}) is working on {layout.root}; "
            "wait for it"
        )
    try:
        yield
    finally:
        release_file_lock(fh)


def _wait(what: str, check: Any, timeout: float, procs: list[Proc]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in procs:
            if not is_alive(p):
                raise PoisonwatchError(f"{p.name} stopped while waiting for {what}; see {p.log}")
        if check():
            return
        time.sleep(0.5)
    logs = ", ".join(p.log for p in procs)
    raise PoisonwatchError(f"timed out after {timeout:.0f} s waiting for {what}; see {logs}")


def _thrift_answers(port: int) -> bool:
    if not _port_open(port):
        return False
    from pyhive import hive

    try:
        conn = hive.connect(host=LOOPBACK, port=port, username="poisonwatch")
    except Exception:
        return False
    try:
        cur = conn.cursor()
        cur.execute("select 1")
        return cur.fetchall() == [(1,)]
    except Exception:
        return False
    finally:
        with contextlib.suppress(Exception):
            conn.close()


def start(workers: int | None = None, timeout: float = 300.0) -> State:
    """Start master, workers and Thrift server; return when the Thrift server answers `select 1`."""
    t0 = time.monotonic()
    check_java()
    settings = Settings.from_env(workers)
    layout = Layout()
    sh = spark_home()
    with _cluster_lock(layout):
        current = layout.state()
        if current is not None:
            alive = [p for p in current.processes if is_alive(p)]
            if alive:
                names = ", ".join(f"{p.name} (pid {p.pid})" for p in alive)
                raise PoisonwatchError(
                    f"a cluster is already running from {layout.root}: {names}. "
                    "`poisonwatch cluster status` shows it, `poisonwatch cluster stop` ends it."
                )
        stray = leftover_pids(layout, current)
        if stray:
            raise PoisonwatchError(
                f"processes of an earlier cluster are still running in {layout.root}: pids "
                f"{', '.join(map(str, stray))}. Run `poisonwatch cluster stop` first."
            )
        busy = [
            f"{what} {port}"
            for what, port in (
                ("master port", settings.master_port),
                ("master UI port", settings.master_ui_port),
                ("Thrift port", settings.thrift_port),
            )
            if not _port_free(port)
        ]
        if busy:
            raise PoisonwatchError(
                f"{', '.join(busy)} on {LOOPBACK} already in use by another program. Choose others "
                "with POISONWATCH_MASTER_PORT, POISONWATCH_MASTER_UI_PORT, POISONWATCH_THRIFT_PORT."
            )
        layout.create()
        for old in layout.run.glob("*.pid"):
            old.unlink()
        (layout.conf / "log4j2.properties").write_text(_LOG4J)
        write_spark_defaults(layout, caller_spark_defaults(layout))
        env = _base_env(layout, settings, sh)
        master_url = f"spark://{LOOPBACK}:{settings.master_port}"
        master_ui = f"http://{LOOPBACK}:{settings.master_ui_port}"
        state = State(
            started_at=time.time(),
            workers=settings.workers,
            master_url=master_url,
            master_ui=master_ui,
            thrift_host=LOOPBACK,
            thrift_port=settings.thrift_port,
            thrift_ui=f"http://{LOOPBACK}:{settings.thrift_ui_port}",
            jdbc_url=f"jdbc:hive2://{LOOPBACK}:{settings.thrift_port}",
        )
        try:
            state.processes.append(
                _launch(
                    "master",
                    [
                        str(sh / "bin/spark-class"),
                        MASTER_CLASS,
                        "--host",
                        LOOPBACK,
                        "--port",
                        str(settings.master_port),
                        "--webui-port",
                        str(settings.master_ui_port),
                    ],
                    env,
                    layout,
                )
            )
            state.save(layout.state_file)
            _wait(
                "the master",
                lambda: (_master_json(master_ui) or {}).get("status") == "ALIVE",
                timeout,
                state.processes,
            )
            for i in range(1, settings.workers + 1):
                work = layout.work / f"worker-{i}"
                work.mkdir(parents=True, exist_ok=True)
                state.processes.append(
                    _launch(
                        f"worker-{i}",
                        [
                            str(sh / "bin/spark-class"),
                            WORKER_CLASS,
                            "--host",
                            LOOPBACK,
                            "--cores",
                            str(settings.worker_cores),
                            "--memory",
                            settings.worker_memory,
                            "--work-dir",
                            str(work),
                            "--webui-port",
                            "0",
                            master_url,
                        ],
                        env,
                        layout,
                    )
                )
                state.save(layout.state_file)

            def workers_alive() -> bool:
                info = _master_json(master_ui) or {}
                alive = [w for w in info.get("workers", []) if w.get("state") == "ALIVE"]
                return len(alive) >= settings.workers

            _wait(f"{settings.workers} worker(s)", workers_alive, timeout, state.processes)
            conf = thrift_conf(layout, settings, master_url)
            java_opts = (
                f"-Dderby.system.home='{layout.root}' "
                f"-Dderby.stream.error.file='{layout.logs / 'derby.log'}' "
                f"-Djava.io.tmpdir='{layout.tmp}'"
            )
            cmd = [
                str(sh / "bin/spark-submit"),
                "--master",
                master_url,
                "--deploy-mode",
                "client",
                "--class",
                THRIFT_CLASS,
                "--name",
                "poisonwatch-thrift",
                "--driver-memory",
                settings.thrift_driver_memory,
                "--driver-java-options",
                java_opts,
            ]
            for key, value in conf.items():
                cmd += ["--conf", f"{key}={value}"]
            cmd.append("spark-internal")
            for key, value in {
                "hive.server2.thrift.bind.host": LOOPBACK,
                "hive.server2.thrift.port": str(settings.thrift_port),
                "hive.server2.transport.mode": "binary",
                "hive.exec.scratchdir": str(layout.hive / "scratch"),
                "hive.exec.local.scratchdir": str(layout.hive / "local-scratch"),
                # One folder per session: Hive deletes it when the session closes, so a shared
                # one vanished under dbt's second thread ("Couldn't create directory").
                "hive.downloaded.resources.dir": f"{layout.hive / 'resources'}/"
                "${hive.session.id}_resources",
                "hive.server2.logging.operation.log.location": str(layout.hive / "operation_logs"),
            }.items():
                cmd += ["--hiveconf", f"{key}={value}"]
            state.processes.append(_launch("thrift", cmd, env, layout))
            state.save(layout.state_file)
            _wait(
                f"the Thrift server on {LOOPBACK}:{settings.thrift_port}",
                lambda: _thrift_answers(settings.thrift_port),
                timeout,
                state.processes,
            )
        except BaseException:
            # Never leave half a cluster behind.
            left = _stop_processes(layout, state)
            if not left:
                layout.state_file.unlink(missing_ok=True)
            raise
        state.startup_seconds = round(time.monotonic() - t0, 1)
        state.save(layout.state_file)
    return state


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _stop_processes(layout: Layout, state: State, grace: float = 30.0) -> list[int]:
    """End the cluster's processes (Thrift server, then workers, then master); return leftovers."""
    order = sorted(
        state.processes,
        key=lambda p: 0 if p.name == "thrift" else (2 if p.name == "master" else 1),
    )
    for group in (
        [p for p in order if p.name == "thrift"],
        [p for p in order if p.name.startswith("worker")],
        [p for p in order if p.name == "master"],
    ):
        targets = [p for p in group if is_alive(p) or _group_members(p.pid)]
        for p in targets:
            _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(
            is_alive(p) or _group_members(p.pid) for p in targets
        ):
            time.sleep(0.3)
        for p in targets:
            if is_alive(p) or _group_members(p.pid):
                _signal_group(p.pid, signal.SIGKILL)
    # Executors that left their worker's group would still run in cluster/work: end those by pid.
    deadline = time.monotonic() + 10
    while True:
        left = leftover_pids(layout, state)
        if not left or time.monotonic() > deadline:
            break
        for pid in _processes_under(layout.root):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.3)
    for p in state.processes:
        with contextlib.suppress(FileNotFoundError):
            (layout.run / f"{p.name}.pid").unlink()
    return leftover_pids(layout, state)


def stop() -> list[Proc]:
    """Stop every process `start` started; raise if any is left. Returns what was stopped."""
    layout = Layout()
    with _cluster_lock(layout):
        state = layout.state()
        if state is None:
            stray = leftover_pids(layout, None)
            if stray:
                raise PoisonwatchError(
                    f"no state file in {layout.root}, but processes run there: {stray}"
                )
            return []
        was_alive = [p for p in state.processes if is_alive(p)]
        left = _stop_processes(layout, state)
        if left:
            raise PoisonwatchError(f"processes still running after stop: pids {left}")
        layout.state_file.unlink()
    return was_alive


@dataclass
class Status:
    state: State | None
    alive: dict[str, bool]
    master: dict[str, Any] | None
    thrift_open: bool
    leftovers: list[int]

    @property
    def running(self) -> bool:
        return bool(self.state) and all(self.alive.values()) and self.thrift_open


def status() -> Status:
    layout = Layout()
    state = layout.state()
    if state is None:
        return Status(None, {}, None, False, leftover_pids(layout, None))
    alive = {p.name: is_alive(p) for p in state.processes}
    master = _master_json(state.master_ui) if alive.get("master") else None
    thrift_open = bool(alive.get("thrift")) and _port_open(state.thrift_port)
    return Status(state, alive, master, thrift_open, leftover_pids(layout, state))


# --- output --------------------------------------------------------------------------------------


def print_status(st: Status) -> None:
    layout = Layout()
    if st.state is None:
        console.print(f"[yellow]no cluster running[/yellow] (store {layout.root})")
        if st.leftovers:
            console.print(f"[red]but processes run in {layout.root}: {st.leftovers}[/red]")
        return
    s = st.state
    headline = "[green]running[/green]" if st.running else "[red]not (fully) running[/red]"
    console.print(f"poisonwatch cluster: {headline}  (store {layout.root})")
    table = Table(show_lines=False)
    for col in ("process", "pid", "alive", "where", "log"):
        table.add_column(col, overflow="fold")
    worker_info = [w for w in (st.master or {}).get("workers", []) if w.get("state") == "ALIVE"]
    for p in s.processes:
        ok = st.alive.get(p.name, False)
        if p.name == "master":
            where = f"{s.master_url}  UI {s.master_ui}"
        elif p.name == "thrift":
            where = f"{s.thrift_host}:{s.thrift_port} ({s.jdbc_url})  UI {s.thrift_ui}"
            if ok and not st.thrift_open:
                where += "  [yellow]port not open yet[/yellow]"
        else:
            where = "worker of " + s.master_url
        table.add_row(
            p.name,
            str(p.pid),
            "[green]yes[/green]" if ok else "[red]no[/red]",
            where,
            os.path.relpath(p.log, layout.root),
        )
    console.print(table)
    if st.master:
        cores = st.master.get("cores", "?")
        used = st.master.get("coresused", "?")
        apps = [a.get("name") for a in st.master.get("activeapps", [])]
        console.print(
            f"workers alive: {len(worker_info)}/{s.workers}, cores used {used}/{cores}, "
            f"applications: {', '.join(apps) or 'none'}"
        )
        for w in worker_info:
            console.print(f"  worker {w.get('id')}  UI {w.get('webuiaddress')}")
    extra = sorted(set(st.leftovers) - {p.pid for p in s.processes})
    if extra:
        console.print(f"other processes of the cluster (executors): {extra}")
    if st.running:
        console.print(
            f"use it: [bold]poisonwatch --target cluster sql 'show databases'[/bold], "
            f"[bold]dbt build --target cluster[/bold], "
            f"[bold]beeline -u {s.jdbc_url}[/bold]"
        )


def print_started(state: State) -> None:
    console.print(
        f"[green]cluster started[/green] in {state.startup_seconds} s: master {state.master_url} "
        f"(UI {state.master_ui}), {state.workers} worker(s), Thrift server {state.jdbc_url} "
        f"(UI {state.thrift_ui})"
    )
    console.print(f"logs and pids: {Layout().root}; stop it with `poisonwatch cluster stop`")


def beeline_path() -> Path:
    return spark_home() / "bin" / "beeline"


def beeline(sql: str, jdbc_url: str | None = None, timeout: float = 300) -> str:
    """Run `beeline -u <jdbc> -e <sql>` from the pyspark installation; return its stdout."""
    layout = Layout()
    url = jdbc_url or (layout.state().jdbc_url if layout.state() else None)
    if not url:
        raise PoisonwatchError("no cluster running: `poisonwatch cluster start`")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOOPBACK})
    out = subprocess.run(
        [str(beeline_path()), "-u", url, "-n", "poisonwatch", "--silent=true", "-e", sql],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        check=False,
        cwd=project_root(),
    )
    if out.returncode != 0:
        raise PoisonwatchError(f"beeline failed ({out.returncode}): {out.stderr[-2000:]}")
    return out.stdout


def run_cluster(action: str, workers: int | None = None, timeout: float = 300.0) -> int:
    """`poisonwatch cluster start|stop|status`; the exit code (status: 0 running, 3 not)."""
    if action == "start":
        print_started(start(workers=workers, timeout=timeout))
        return 0
    if action == "stop":
        stopped = stop()
        names = ", ".join(f"{p.name} (pid {p.pid})" for p in stopped) or "nothing was running"
        Console(stderr=True).print(f"cluster stopped: {names}; no process left")
        return 0
    st = status()
    print_status(st)
    return 0 if st.running else 3
