"""Where poisonwatch keeps its state and how it builds the SparkSession.

One source of truth: the Spark settings live in `profiles.yml` (target `local`), which dbt reads
too, so `dbt build` and the Python commands see the same warehouse and metastore.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import jinja2
import yaml

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# The analyst-facing marts (database `poisonwatch`), as DESIGN.md names them.
MARTS = (
    "poison_messages",
    "poison_conversations",
    "dlq_messages",
    "queue_health",
    "consumer_circuit_breakers",
    "failure_groups",
    "remediation_actions",
)
MIN_JAVA = 17


class PoisonwatchError(Exception):
    """An error with a message meant for the person at the terminal (no stack trace)."""


class StoreBusyError(PoisonwatchError):
    """The embedded store (Derby metastore) is in use by another process."""


def project_root() -> Path:
    """The dbt project folder: $POISONWATCH_PROJECT_DIR, else the checkout this package lives in."""
    env = os.environ.get("POISONWATCH_PROJECT_DIR")
    if env:
        return Path(env).resolve()
    here = Path(__file__).resolve()
    for parent in here.parents:
        if (parent / "dbt_project.yml").is_file():
            return parent
    return Path.cwd()


JARS_ENV = "POISONWATCH_JARS"


def jar_folder() -> Path:
    """Where `make setup` puts Delta Lake's jars (poisonwatch.warehouse.jars): in the
    virtualenv, beside the class archive."""
    return Path(sys.prefix) / "share" / "poisonwatch" / "jars"


def home() -> Path:
    """$POISONWATCH_HOME (absolute), default `.poisonwatch/` in the project root.

    The absolute path is exported so that dbt, run from this process, renders the same profile.
    """
    raw = os.environ.get("POISONWATCH_HOME") or str(project_root() / ".poisonwatch")
    path = Path(raw).expanduser().resolve()
    # The profile passes both folders to the driver JVM in single quotes: Spark splits its
    # extraJavaOptions on spaces, and a folder name may have them.
    folders = (
        ("POISONWATCH_HOME", path),
        ("POISONWATCH_PROJECT_DIR", os.environ.get("POISONWATCH_PROJECT_DIR", "")),
        ("the project folder", project_root()),
    )
    for what, folder in folders:
        if "'" in str(folder):
            raise PoisonwatchError(
                f"{what} {str(folder)!r} has a single quote ('), which Spark's JVM options "
                "cannot carry: use a folder without one."
            )
    os.environ["POISONWATCH_HOME"] = str(path)
    os.environ.setdefault("POISONWATCH_PROJECT_DIR", str(project_root()))
    # The driver's class path in the profile: Delta Lake's jars, a Java class-path wildcard.
    os.environ.setdefault(JARS_ENV, str(jar_folder() / "*"))
    # Spark on loopback only: no "hostname resolves to a loopback address" guessing.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    for sub in ("logs", "tmp", "warehouse"):
        (path / sub).mkdir(parents=True, exist_ok=True)
    return path


def target_name(explicit: str | None = None) -> str:
    """The dbt target: the explicit argument, else $POISONWATCH_TARGET, else `local`."""
    return explicit or os.environ.get("POISONWATCH_TARGET") or "local"


def _env_var(name: str, default: str | None = None) -> str:
    value = os.environ.get(name, default)
    if value is None:
        raise PoisonwatchError(f"profiles.yml needs environment variable {name}, which is not set")
    return value


def load_profile(target: str | None = None) -> dict[str, Any]:
    """The rendered output `target` of profile `poisonwatch` in profiles.yml."""
    home()
    name = target_name(target)
    path = project_root() / "profiles.yml"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["as_number"] = lambda v: int(v) if str(v).isdigit() else float(v)
    env.filters["as_bool"] = lambda v: str(v).lower() in ("1", "true", "yes")
    env.globals["env_var"] = _env_var

    def render(node: Any) -> Any:
        if isinstance(node, str):
            return env.from_string(node).render()
        if isinstance(node, dict):
            return {k: render(v) for k, v in node.items()}
        if isinstance(node, list):
            return [render(v) for v in node]
        return node

    doc = yaml.safe_load(path.read_text())
    outputs = doc["poisonwatch"]["outputs"]
    if name not in outputs:
        raise PoisonwatchError(f"{path}: no target {name!r} (have: {', '.join(outputs)})")
    return render(outputs[name])


def project_var(name: str) -> Any:
    """Var `name` of dbt_project.yml, where each default is defined once: the runner reads it
    from there instead of keeping a copy (a templated value is not rendered; see
    table_format)."""
    path = project_root() / "dbt_project.yml"
    project_vars = yaml.safe_load(path.read_text()).get("vars") or {}
    if name not in project_vars:
        raise PoisonwatchError(f"{path}: vars has no {name!r}")
    return project_vars[name]


def table_format() -> str:
    """The table format of every table (`delta`, or `parquet` where Delta is missing): var
    `file_format` of dbt_project.yml, rendered as dbt renders it."""
    path = project_root() / "dbt_project.yml"
    raw = (yaml.safe_load(path.read_text()).get("vars") or {}).get("file_format")
    if not isinstance(raw, str):
        raise PoisonwatchError(f"{path}: vars.file_format must be a string, got {raw!r}")
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.globals["env_var"] = _env_var
    value = env.from_string(raw).render().strip().lower()
    if value not in ("delta", "parquet"):
        raise PoisonwatchError(
            f"table format {value!r} (POISONWATCH_FILE_FORMAT or {path} vars.file_format): "
            "poisonwatch supports delta and parquet"
        )
    return value


# Production builds run dbt's data tests unless this says `off`: a quicker build of models and
# seeds where the data tests run elsewhere (serve's `--no-data-tests` for one server).
DATA_TESTS_ENV = "POISONWATCH_DATA_TESTS"


def data_tests_on() -> bool:
    """Whether a production build runs the data tests: POISONWATCH_DATA_TESTS, `on` unset."""
    raw = os.environ.get(DATA_TESTS_ENV, "on").strip().lower()
    if raw in ("on", "1", "true", "yes"):
        return True
    if raw in ("off", "0", "false", "no"):
        return False
    raise PoisonwatchError(f"{DATA_TESTS_ENV} must be on or off, not {raw!r}")


@dataclass(frozen=True)
class JavaInfo:
    path: str
    major: int
    text: str


def check_java() -> JavaInfo:
    """Stop with a clear message when `java` is missing or older than 17."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise PoisonwatchError(
            "Java is not installed (no `java` on PATH and no $JAVA_HOME). poisonwatch runs Spark, "
            f"which needs Java {MIN_JAVA} or newer: e.g. `apt-get install openjdk-17-jre-headless`."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    text = (out.stderr or out.stdout).strip()
    match = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not match:
        raise PoisonwatchError(f"Could not read the Java version from `{java} -version`: {text!r}")
    major = int(match.group(1))
    if major == 1 and match.group(2):  # "1.8.0_362" style
        major = int(match.group(2))
    if major < MIN_JAVA:
        raise PoisonwatchError(
            f"Java {major} found at {java}; poisonwatch needs Java {MIN_JAVA} or newer "
            "(Spark 4). Install a newer JDK and point JAVA_HOME at it."
        )
    return JavaInfo(path=java, major=major, text=text.splitlines()[0])


_lock_handle: Any = None


def _derby_in_use(store: Path) -> bool:
    """True when another JVM has booted the Derby metastore (it holds a lock on dbex.lck)."""
    lock_file = store / "metastore_db" / "dbex.lck"
    if not lock_file.exists():
        return False
    try:
        with open(lock_file, "r+b") as fh:
            try:
                fcntl.lockf(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                return True
            fcntl.lockf(fh, fcntl.LOCK_UN)
    except OSError:
        return False
    return False


def _own_spark_running() -> bool:
    """True when this Python process has a live SparkContext (its gateway JVM is our child)."""
    pyspark = sys.modules.get("pyspark")
    if pyspark is None:
        return False
    return pyspark.SparkContext._active_spark_context is not None


def take_file_lock(path: Path, holder: str) -> tuple[Any, str]:
    """Take an exclusive, non-blocking `flock` on `path` and write `holder` into the file.

    Returns the open file (keep it open to hold the lock; see release_file_lock) and "", or
    None and what the file says about the process holding it.
    """
    fh = open(path, "a+")  # noqa: SIM115 - held until release_file_lock()
    try:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        fh.seek(0)
        other = fh.read().strip() or "another process"
        fh.close()
        return None, other
    fh.seek(0)
    fh.truncate()
    fh.write(holder + "\n")
    fh.flush()
    return fh, ""


def release_file_lock(fh: Any) -> None:
    """Release a lock taken by take_file_lock (nothing when `fh` is None or already closed)."""
    if fh is None:
        return
    with contextlib.suppress(OSError, ValueError):
        fcntl.flock(fh, fcntl.LOCK_UN)
    with contextlib.suppress(OSError):
        fh.close()


def acquire_store_lock() -> None:
    """Take the store for this process, or raise StoreBusyError naming who has it.

    Derby, the embedded metastore, allows one JVM at a time; commands run one after another.
    """
    global _lock_handle
    if _lock_handle is not None:
        return
    store = home()
    fh, holder = take_file_lock(store / ".lock", f"poisonwatch pid {os.getpid()}")
    if fh is None:
        raise StoreBusyError(
            f"The poisonwatch store at {store} is in use by {holder}. Derby, the embedded "
            "metastore, allows one process at a time: wait for it to finish and run this again."
        )
    # When this process already runs a Spark JVM (an in-process `dbt` run opened the session),
    # Derby's lock is that JVM's: the session we are about to open is the same one. Otherwise
    # a command that has just ended may still be shutting its JVM down: give it a moment.
    deadline = time.monotonic() + 20
    own = _own_spark_running()
    while not own and _derby_in_use(store) and time.monotonic() < deadline:
        time.sleep(0.5)
    if not own and _derby_in_use(store):
        release_file_lock(fh)
        raise StoreBusyError(
            f"The metastore at {store}/metastore_db is open in another process (a `dbt` command, "
            "a notebook or another Spark application). Derby allows one process at a time: "
            "wait for it to finish and run this again."
        )
    _lock_handle = fh
    atexit.register(release_store_lock)


def describe_store_holder(text: str) -> None:
    """Say who holds the store in its lock file (what a refused command prints)."""
    fh = _lock_handle
    if fh is None:
        return
    fh.seek(0)
    fh.truncate()
    fh.write(text + "\n")
    fh.flush()


def release_store_lock() -> None:
    global _lock_handle
    fh, _lock_handle = _lock_handle, None
    release_file_lock(fh)


def stop_spark(timeout: float | None = 30) -> None:
    """Stop the SparkSession and wait for its JVM to exit, so the next command finds Derby free.

    After `timeout` seconds the JVM is killed; `None` waits as long as it takes (the class
    archive's run: its JVM writes the archive while it exits, and a kill cuts that short).
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    sc = SparkContext._active_spark_context
    if sc is not None:
        sc.stop()
    if gateway is not None:
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            # The gateway JVM exits when its stdin closes (PythonGatewayServer watches it).
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        SparkContext._gateway = None
        SparkContext._jvm = None


def spark_conf(target: str | None = None) -> dict[str, str]:
    """The Spark settings of the `local` target, as strings."""
    profile = load_profile(target)
    params = profile.get("server_side_parameters") or {}
    return {str(k): str(v) for k, v in params.items()}


# --- the class archive ------------------------------------------------------------------------
# Every command starts a JVM that loads some 20,000 classes of Spark, Hive and Derby before its
# first statement. A JVM class-data-sharing archive of those classes (JDK 13+ dynamic AppCDS),
# written once by `make setup` (poisonwatch.warehouse.class_archive), is mapped instead of
# loading them, which shortens every start. The JVM checks the archive against its own build and
# class path and ignores one that does not match.

CLASS_ARCHIVE_ENV = "POISONWATCH_CLASS_ARCHIVE"
CLASS_ARCHIVE_DUMP_ENV = "POISONWATCH_CLASS_ARCHIVE_DUMP"


# The per-virtualenv archives: `spark-classes-<key>.jsa`, the key a hash of what the archive
# was made from (class_archive_path). The builder removes earlier ones by this name.
CLASS_ARCHIVE_KEY_CHARS = 12
CLASS_ARCHIVE_NAME = re.compile(rf"spark-classes-[0-9a-f]{{{CLASS_ARCHIVE_KEY_CHARS}}}\.jsa")


def class_archive_path(java: JavaInfo) -> Path:
    """The class archive for this Java and pyspark: $POISONWATCH_CLASS_ARCHIVE when it names a
    file, else one per virtualenv, named after what it was made from."""
    env = os.environ.get(CLASS_ARCHIVE_ENV, "")
    if env and env != "off":
        return Path(env).resolve()
    from importlib.metadata import version

    made_from = f"{Path(java.path).resolve()}|{java.text}|pyspark {version('pyspark')}"
    key = hashlib.sha256(made_from.encode()).hexdigest()[:CLASS_ARCHIVE_KEY_CHARS]
    return Path(sys.prefix) / "share" / "poisonwatch" / f"spark-classes-{key}.jsa"


def class_archive_options(java: JavaInfo) -> str:
    """JVM options that map the class archive: '' when there is none, when
    $POISONWATCH_CLASS_ARCHIVE is `off`, or when its path would not survive Spark's splitting
    of extraJavaOptions. The archive builder's own child writes one instead."""
    dump = os.environ.get(CLASS_ARCHIVE_DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump}"
    if os.environ.get(CLASS_ARCHIVE_ENV) == "off":
        return ""
    path = class_archive_path(java)
    if not path.is_file() or re.search(r"[\s'\"\\]", str(path)):
        return ""
    # -Xlog:cds*=off: an archive of another build or class path is skipped without a warning
    # on the user's terminal (the JVM logs those to stdout).
    return f"-XX:SharedArchiveFile={path} -Xlog:cds*=off"


@contextlib.contextmanager
def _launch_environment(archive: str) -> Iterator[None]:
    """The environment Spark's launcher sees while the driver JVM starts. The launcher puts
    $SPARK_CONF_DIR first on the driver's class path, and a JVM whose class path is not the
    archive's maps none of the archive. So with an archive the folder stays off the class
    path: its spark-defaults.conf goes to spark-submit as `--properties-file` instead (the
    folder's other files are not read), and the environment is as it was afterwards."""
    conf_dir = os.environ.get("SPARK_CONF_DIR")
    if not archive or not conf_dir:
        yield
        return
    saved = {k: os.environ.get(k) for k in ("SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS")}
    submit_args = saved["PYSPARK_SUBMIT_ARGS"] or "pyspark-shell"
    defaults = Path(conf_dir) / "spark-defaults.conf"
    if defaults.is_file() and "--properties-file" not in submit_args:
        submit_args = f"--properties-file {shlex.quote(str(defaults))} {submit_args}"
    os.environ.pop("SPARK_CONF_DIR")
    os.environ["PYSPARK_SUBMIT_ARGS"] = submit_args
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def check_jars() -> None:
    """Raise a PoisonwatchError when the folder of $POISONWATCH_JARS holds no jar: Spark would
    start and fail later, at the first table, with "Cannot find catalog plugin class"."""
    home()
    pattern = os.environ[JARS_ENV]
    folder = Path(pattern[:-1] if pattern.endswith("*") else pattern)
    if not any(folder.glob("delta-spark*.jar")):
        raise PoisonwatchError(
            f"Delta Lake's jars are not in {folder}: run `make setup` (it fetches them from "
            "Maven Central with mvn), or point POISONWATCH_JARS at a folder that has them."
        )


def _quiet_query_context_loggers() -> None:
    """pyspark 4 logs every failed statement as a JSON line with the whole JVM stack, before
    the exception reaches our code: a command that reports the error itself (`poisonwatch sql`)
    would print it twice, the second time as a wall of text. An exception we do not catch
    still prints its traceback."""
    from pyspark.logger import PySparkLogger

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        PySparkLogger.getLogger(name).disabled = True


def spark_session(target: str | None = None) -> SparkSession:
    """The SparkSession for the embedded store (the same one `dbt` on target `local` builds)."""
    name = target_name(target)
    profile = load_profile(name)
    if profile.get("method") != "session":
        raise PoisonwatchError(
            f"target {name!r} uses method {profile.get('method')!r}: the Python commands open a "
            "local SparkSession only for method `session`."
        )
    java = check_java()
    check_jars()
    acquire_store_lock()
    store = home()
    problem = store_halves_problem(store)
    if problem is not None:
        raise BrokenStoreError(problem)
    from pyspark.sql import SparkSession

    conf = spark_conf(name)
    archive = class_archive_options(java)
    if archive:
        options = conf.get("spark.driver.extraJavaOptions", "")
        conf["spark.driver.extraJavaOptions"] = f"{options} {archive}".strip()
    builder = SparkSession.builder.enableHiveSupport()
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _launch_environment(archive):
            spark = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start: say why without a Py4J trace
        raise PoisonwatchError(f"Spark did not start: {exc}") from exc
    spark.sparkContext.setLogLevel("ERROR")
    _quiet_query_context_loggers()
    atexit.register(stop_spark)
    try:
        spark.sql("show databases").collect()
    except Exception as exc:
        text = str(exc)
        if "Another instance of Derby" in text or "XSDB6" in text:
            raise StoreBusyError(
                f"The metastore at {home()}/metastore_db is open in another process. Derby allows "
                "one process at a time: wait for it to finish and run this again."
            ) from None
        raise
    warehouse = local_path(conf.get("spark.sql.warehouse.dir", str(store / "warehouse")))
    problem = store_locations_problem(store, _database_locations(spark), warehouse)
    if problem is not None:
        raise BrokenStoreError(problem)
    return spark


# --- the store's two halves -------------------------------------------------------------------
# The metastore (`metastore_db/`, the catalogue) and the warehouse folder (`warehouse/`, the
# Parquet files) must agree. When one is gone and the other remains, Spark fails deep inside a
# later statement (LOCATION_ALREADY_EXISTS, missing files): say so up front, with the command
# that recovers (`poisonwatch store rebuild`, poisonwatch.warehouse.store).

REBUILD_COMMAND = "poisonwatch store rebuild"


class BrokenStoreError(PoisonwatchError):
    """The metastore and the warehouse folder of the embedded store disagree."""


def warehouse_databases(store: Path) -> list[str]:
    """Databases whose folder in the warehouse holds at least one table folder."""
    warehouse = store / "warehouse"
    if not warehouse.is_dir():
        return []
    return sorted(
        p.name.removesuffix(".db")
        for p in warehouse.glob("*.db")
        if p.is_dir() and any(c.is_dir() for c in p.iterdir())
    )


def store_halves_problem(store: Path) -> str | None:
    """Before Spark starts: a warehouse with tables but no metastore that knows them."""
    if (store / "metastore_db" / "service.properties").is_file():
        return None
    databases = warehouse_databases(store)
    if not databases:
        return None
    return (
        f"The store at {store} is broken: its metastore ({store / 'metastore_db'}) is missing "
        f"but its warehouse ({store / 'warehouse'}) still holds tables of "
        f"{', '.join(databases)}; Spark would fail on them (LOCATION_ALREADY_EXISTS). "
        f"Recover with:\n\n    {REBUILD_COMMAND}\n\n"
        "It moves the warehouse aside (nothing is deleted), creates a fresh store, copies the "
        "raw tables (landed data) and the apply ledgers back, and rebuilds the models."
    )


def local_path(location: str) -> Path:
    """A folder from a metastore location or a warehouse setting: `file:` address or path."""
    return Path(unquote(location.removeprefix("file:")))


def store_locations_problem(
    store: Path, locations: dict[str, str], warehouse: Path | None = None
) -> str | None:
    """After Spark starts: databases the metastore lists whose folders are gone, or are not in
    this store's warehouse folder (`warehouse`, default `store/warehouse`).

    The Derby metastore records absolute folders. A store copied or moved to another folder
    would read and write the old folder's files through it (and create them again if they
    are gone), and `poisonwatch build`, which reads the ledgers from this store's folder,
    would find nothing new."""
    warehouse = (warehouse or store / "warehouse").resolve()
    missing: list[str] = []
    elsewhere: dict[str, Path] = {}
    for name, location in sorted(locations.items()):
        if name == "default" or not location.startswith("file:"):
            continue
        folder = local_path(location)
        if folder.exists():
            # The folder holding it, not the folder itself: a database folder linked onto
            # another disk is still this store's.
            if not folder.parent.resolve().is_relative_to(warehouse):
                elsewhere[name] = folder
        elif (warehouse / folder.name).is_dir():
            elsewhere[name] = folder  # moved here: this store's warehouse holds its folder
        else:
            missing.append(name)
    if missing:
        return (
            f"The store at {store} is broken: its metastore lists database(s) "
            f"{', '.join(missing)} whose folders in {warehouse} are gone (the warehouse was "
            f"deleted or moved). Recover with:\n\n    {REBUILD_COMMAND}\n\n"
            "It moves the metastore aside (nothing is deleted), creates a fresh store with the "
            "raw tables and apply ledgers that are left, and rebuilds the models; then load the "
            "landing folders again (`poisonwatch ingest LANDING`: files already loaded are known "
            "by their content, records by their natural key)."
        )
    if elsewhere:
        folders = "; ".join(f"{name} in {folder}" for name, folder in elsewhere.items())
        return (
            f"The store at {store} was copied or moved from another folder: its metastore "
            f"keeps database(s) outside its warehouse ({warehouse}): {folders}. Using it "
            "would read and write the files there, not here. Recover "
            f"with:\n\n    {REBUILD_COMMAND}\n\n"
            "It moves this store's metastore and warehouse aside (nothing is deleted), creates "
            "a fresh store here, copies back the raw tables and apply ledgers from this "
            "store's own warehouse folder, and rebuilds the models."
        )
    return None


def _database_locations(spark: SparkSession) -> dict[str, str]:
    """database -> location URI, from the metastore (a few cheap catalogue calls)."""
    return {
        db.name: str(db.locationUri) for db in spark.catalog.listDatabases() if db.name != "default"
    }


def crash_point(name: str) -> None:
    """Tests: `POISONWATCH_CRASH_AT=<name>` kills this process with SIGKILL here;
    `POISONWATCH_PAUSE_AT=<name>` writes the pid to $POISONWATCH_PAUSE_FILE and sleeps (for
    lock tests). Both ingest and apply mark their crash points with it."""
    if os.environ.get("POISONWATCH_CRASH_AT") == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get("POISONWATCH_PAUSE_AT") == name:
        marker = os.environ.get("POISONWATCH_PAUSE_FILE")
        if marker:
            Path(marker).write_text(f"{os.getpid()}\n")
        time.sleep(float(os.environ.get("POISONWATCH_PAUSE_SECONDS", "600")))
