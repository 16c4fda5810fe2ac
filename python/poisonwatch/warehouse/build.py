"""`poisonwatch build`: the production build (`dbt build --selector production`), run only as far
as new input reaches.

The production build (selectors.yml: seeds, models and data tests, no unit tests) runs after every
ingest and must cost what the new data costs. Before calling dbt this module reads what the build
depends on, cheaply:

- the ingest ledger (`raw.ingested_files`, one row per landed file): per dataset, how many files
  and the newest `_batch_id` (ingest gives every batch an id that sorts after every committed one);
- the remediation ledger `poisonwatch_ops.action_log` (`apply` appends it last; the effects it
  commits are read through it) and the operators' requests (`replay_requests`,
  `resume_requests`): their row counts;
- the dbt project itself: a sha256 over models, macros, seeds, tests, snapshots, dbt_project.yml,
  selectors.yml and profiles.yml (a target's schema lives there).

and compares it with what the last successful production build of this target saw (kept in the
store, `production_build.json`):

- nothing changed: no dbt at all, and it says why (no parse, no DAG: seconds, not minutes);
- the project changed, or there is no record (first build, a wiped store), or `--full-refresh`:
  the whole production selector;
- otherwise only what is downstream of the sources that changed
  (`--select source:<source>.<table>+ …`, unit tests excluded): a new batch of queue snapshots
  does not rerun the attempt models, an `apply` reruns only what reads the ledgers.

The record is written only after dbt succeeded, with the inputs read before it started: input
that lands during a build is seen as new by the next one. It also keeps the stamp that build's
incremental models wrote (dbt's `run_started_at`); the next build of what is downstream of new
input passes it to them (POISONWATCH_CHANGED_SINCE), and they read only the upstream partitions
stamped after it, by a literal that file statistics can skip by. Such a selection takes all
models downstream of what it runs, so a recorded build ran every reader of every partition it
stamped. A build of the whole selector passes none (a model may have come back since). No
model reads the clock (they read only their inputs and `run_started_at` as a label), so a
skipped build leaves every table as a new one would have.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from rich.console import Console

from poisonwatch.config import (
    PoisonwatchError,
    data_tests_on,
    home,
    project_root,
    target_name,
)
from poisonwatch.warehouse.schemas import BATCH_RE

# The project files a build's result depends on (dbt's own parse inputs, less docs-only folders).
PROJECT_DIRS = ("models", "macros", "seeds", "tests", "snapshots")
PROJECT_FILES = ("dbt_project.yml", "selectors.yml", "packages.yml", "profiles.yml")
LEDGER_TABLE = "ingested_files"
# Ops table → its dbt source. The remediation ledger: `apply` appends it last (its commit point),
# and the staging models of its effect tables read only committed runs through it, so they are
# all downstream of it. The operators' requests (`replay`, `resume`) change what is planned.
OPS_TABLES = {
    "action_log": "ops",
    "replay_requests": "remediation_ops",
    "resume_requests": "remediation_ops",
}
# Landing dataset → dbt source (models/staging/<source>/_<source>__sources.yml).
SOURCE_PREFIXES = {"ssb_": "service_broker", "jms_": "jms"}
PRODUCTION = ["build", "--selector", "production"]
NO_UNIT_TESTS = ["--exclude-resource-type", "unit_test"]
NO_DATA_TESTS = ["--exclude-resource-type", "test"]
# The backtests replay all history: built by `poisonwatch backtest`, never after an ingest.
NOT_ON_DEMAND = ["--exclude", "tag:on_demand"]
# What every ingest touches: the ledger and the rejects, with their staging views and tests.
# Not `source:ingest+`: every staging model reads the ledger to keep only committed batches, so
# that would rerun every model after any ingest; a dataset's models rerun through its own source.
INGEST_SELECTORS = [
    "source:ingest.ingested_files",
    "stg_ingest__ingested_files+",
    "source:ingest.raw_rejects+",
]
STATE_FILE = "production_build.json"
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# The stamp's only accepted spelling (dbtrun.CHANGED_SINCE_ENV carries it to the models).
STAMP = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")


@dataclass
class BuildInputs:
    """What a production build reads, reduced to a few comparable values."""

    project: str
    datasets: dict[str, list[Any]] = field(default_factory=dict)  # dataset → [files, batch]
    ops: dict[str, int] = field(default_factory=dict)  # ops table → rows
    # Delta ledgers: table folder → its log's latest version, read before the figures above.
    delta_versions: dict[str, int] = field(default_factory=dict)


@dataclass
class BuildResult:
    ran: bool
    reason: str
    dbt_args: list[str]
    changed: list[str]
    seconds: float
    inputs: BuildInputs


def project_fingerprint(root: Path | None = None) -> str:
    """sha256 over the relative path and bytes of every file the build's result depends on."""
    root = root or project_root()
    digest = hashlib.sha256()
    paths: list[Path] = [root / name for name in PROJECT_FILES if (root / name).is_file()]
    for folder in PROJECT_DIRS:
        if (root / folder).is_dir():
            paths += [p for p in (root / folder).rglob("*") if p.is_file()]
    for path in sorted(paths):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _databases(root: Path) -> tuple[str, str]:
    """The raw and ops databases (dbt_project.yml vars), checked to be plain identifiers: they
    go into SQL and paths."""
    data = yaml.safe_load((root / "dbt_project.yml").read_text(encoding="utf-8")) or {}
    dbt_vars = data.get("vars") or {}
    names = (
        str(dbt_vars.get("raw_database", "raw")),
        str(dbt_vars.get("ops_database", "poisonwatch_ops")),
    )
    for name in names:
        if not IDENTIFIER.fullmatch(name):
            raise PoisonwatchError(f"dbt_project.yml: database name {name!r} is not an identifier")
    return names


def read_inputs(engine: Any, root: Path | None = None) -> BuildInputs:
    """The ledgers' figures and the project's fingerprint (a few small queries, no dbt)."""
    root = root or project_root()
    raw_db, ops_db = _databases(root)
    inputs = BuildInputs(project=project_fingerprint(root))
    if engine.table_exists(raw_db, LEDGER_TABLE):
        _, rows = engine.query(
            f"select dataset, count(*), max(_batch_id) from `{raw_db}`.`{LEDGER_TABLE}` "
            "group by dataset order by dataset"
        )
        inputs.datasets = {str(d): [int(n), str(b)] for d, n, b in rows}
    present = [t for t in OPS_TABLES if engine.table_exists(ops_db, t)]
    if present:
        counts = ", ".join(f"(select count(*) from `{ops_db}`.`{t}`)" for t in present)
        _, rows = engine.query(f"select {counts}")
        inputs.ops = {t: int(n) for t, n in zip(present, rows[0], strict=True)}
    return inputs


def parquet_parts(folder: Path) -> list[Path]:
    """The data files of a table folder as Spark reads them: every file below it, partition
    folders included, except names starting with `_` or `.` (`_SUCCESS`, `_temporary`, checksum
    and staging files)."""
    found = []
    for path in sorted(folder.rglob("*")):
        parts = path.relative_to(folder).parts
        if path.is_file() and not any(p.startswith(("_", ".")) for p in parts):
            found.append(path)
    return found


_DELTA_COMMIT = re.compile(r"\d{20}\.json")


def delta_log_versions(folders: list[Path]) -> dict[str, int] | None:
    """Each Delta table folder's latest version (its newest commit file's number, as Delta's
    protocol names them); None unless every folder is a Delta table with a commit."""
    versions: dict[str, int] = {}
    for folder in folders:
        log = folder / "_delta_log"
        if not log.is_dir():
            return None
        commits = [int(p.name[:20]) for p in log.iterdir() if _DELTA_COMMIT.fullmatch(p.name)]
        if not commits:
            return None
        versions[f"{folder.parent.name}/{folder.name}"] = max(commits)
    return versions


def _ledger_folders(warehouse: Path, root: Path) -> list[Path]:
    raw_db, ops_db = _databases(root)
    return [
        warehouse / f"{raw_db}.db" / LEDGER_TABLE,
        *(warehouse / f"{ops_db}.db" / t for t in OPS_TABLES),
    ]


def read_inputs_from_files(
    warehouse: Path, root: Path | None = None, last: dict[str, Any] | None = None
) -> BuildInputs | None:
    """The same figures as read_inputs, read from the local target's warehouse folder
    (`<db>.db/<table>/`) without starting Spark; None when a ledger table's folder is missing,
    so the caller asks Spark. Only a "nothing new" answer is taken from here: starting the JVM
    would cost more than the whole check. Parquet ledgers are read with pyarrow (.parquet, not
    .dataset: the latter imports pandas, seconds of the check). A Delta ledger's folder keeps
    the files of deleted rows until a vacuum, so its figures come from Spark; but when every
    ledger's log is at the version the `last` build recorded, nothing was written since, and
    that build's figures still hold."""
    import pyarrow.parquet as pq

    root = root or project_root()
    folders = _ledger_folders(warehouse, root)
    if not all(f.is_dir() for f in folders):
        return None
    if any((f / "_delta_log").is_dir() for f in folders):
        versions = delta_log_versions(folders)
        if not versions or last is None or last.get("delta_versions") != versions:
            return None
        return BuildInputs(
            project=project_fingerprint(root),
            datasets={d: list(v) for d, v in (last.get("datasets") or {}).items()},
            ops={t: int(n) for t, n in (last.get("ops") or {}).items()},
            delta_versions=versions,
        )
    ledger_dir, *ops_dirs = folders
    inputs = BuildInputs(project=project_fingerprint(root))
    per_dataset: dict[str, list[Any]] = {}
    for part in parquet_parts(ledger_dir):
        table = pq.ParquetFile(part).read(columns=["dataset", "_batch_id"])
        for dataset, batch in zip(
            table.column("dataset").to_pylist(),
            table.column("_batch_id").to_pylist(),
            strict=True,
        ):
            entry = per_dataset.setdefault(str(dataset), [0, str(batch)])
            entry[0] += 1
            entry[1] = max(entry[1], str(batch))
    inputs.datasets = dict(sorted(per_dataset.items()))
    for table_name, folder in zip(OPS_TABLES, ops_dirs, strict=True):
        inputs.ops[table_name] = sum(
            pq.ParquetFile(part).metadata.num_rows for part in parquet_parts(folder)
        )
    return inputs


def _state_path() -> Path:
    return home() / STATE_FILE


def load_state(target: str) -> dict[str, Any] | None:
    """The record of this target's last successful production build, or None."""
    path = _state_path()
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # unreadable: build everything and write a fresh record
    entry = data.get(target) if isinstance(data, dict) else None
    return entry if isinstance(entry, dict) else None


def save_state(
    target: str,
    inputs: BuildInputs,
    dbt_args: list[str],
    built_at: str | None = None,
    changes_up_to: str | None = None,
) -> None:
    path = _state_path()
    data: dict[str, Any] = {}
    if path.is_file():
        try:
            loaded = json.loads(path.read_text(encoding="utf-8"))
            data = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            data = {}
    data[target] = {
        "built_at": built_at or datetime.now(UTC).replace(microsecond=0).isoformat(),
        "dbt_args": dbt_args,
        "changes_up_to": changes_up_to,
        **asdict(inputs),
    }
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    tmp.replace(path)


def source_of(dataset: str) -> str | None:
    for prefix, source in SOURCE_PREFIXES.items():
        if dataset.startswith(prefix):
            return source
    return None


def plan_build(
    inputs: BuildInputs, last: dict[str, Any] | None, full_refresh: bool = False
) -> tuple[list[str] | None, str, list[str]]:
    """(dbt arguments or None to skip, the reason, the changed inputs)."""
    if full_refresh:
        return [*PRODUCTION, "--full-refresh"], "--full-refresh: every model from raw", []
    if last is None:
        return PRODUCTION, "no earlier production build recorded in this store", []
    if last.get("project") != inputs.project:
        return PRODUCTION, "the dbt project changed since the last production build", ["project"]
    old_datasets = last.get("datasets") or {}
    old_ops = last.get("ops") or {}
    changed_datasets = sorted(
        d for d in inputs.datasets if list(old_datasets.get(d) or []) != inputs.datasets[d]
    )
    # A ledger table that did not exist yet (the first build's on-run-start hook creates it
    # empty) had 0 rows.
    changed_ops = sorted(t for t in inputs.ops if old_ops.get(t, 0) != inputs.ops[t])
    gone = sorted(set(old_datasets) - set(inputs.datasets)) + sorted(set(old_ops) - set(inputs.ops))
    if gone:
        return PRODUCTION, "ledger entries disappeared: " + ", ".join(gone), gone
    changed_sources = [f"{OPS_TABLES[t]}.{t}" for t in changed_ops]
    changed = changed_datasets + changed_sources
    if not changed:
        newest = max((b for _, b in inputs.datasets.values()), default="none")
        return (
            None,
            f"nothing new since the production build of {last.get('built_at')} "
            f"(newest ingest batch {newest}, remediation ledger unchanged, same project)",
            [],
        )
    selectors: list[str] = []
    if changed_datasets:
        # Every ingest appends to the ledger and maybe raw_rejects.
        selectors += INGEST_SELECTORS
    for dataset in changed_datasets:
        source = source_of(dataset)
        if source is None:
            return PRODUCTION, f"new data in dataset {dataset} with no known source", changed
        selectors.append(f"source:{source}.{dataset}+")
    selectors += [f"source:{t}+" for t in changed_sources]
    return (
        ["build", "--select", *selectors, *NO_UNIT_TESTS, *NOT_ON_DEMAND],
        "new input in " + ", ".join(changed) + ": what is downstream of it",
        changed,
    )


def without_data_tests(args: list[str]) -> list[str]:
    """The same dbt arguments with data tests excluded too (one --exclude-resource-type)."""
    if NO_UNIT_TESTS[0] in args:
        at = args.index(NO_UNIT_TESTS[0]) + 2
        return [*args[:at], "test", *args[at:]]
    return [*args, *NO_DATA_TESTS]


def production_build(
    engine: Any,
    target: str | None = None,
    full_refresh: bool = False,
    data_tests: bool | None = None,
    console: Console | None = None,
) -> BuildResult:
    """Run the production build as far as new input reaches (or not at all); see the module
    docstring. `data_tests=False` also excludes data tests (the bench's quick mode); None
    follows POISONWATCH_DATA_TESTS (config.data_tests_on)."""
    from poisonwatch.warehouse.dbtrun import run_dbt

    console = console or Console(stderr=True)
    name = target_name(target)
    started = time.monotonic()
    inputs = read_inputs(engine)
    inputs.delta_versions = _ledger_versions(name)
    last = load_state(name)
    args, reason, changed = plan_build(inputs, last, full_refresh)
    if args is None:
        if last is not None and inputs.delta_versions != last.get("delta_versions"):
            # Same figures at newer log versions: the next check can say so without Spark.
            save_state(
                name,
                inputs,
                list(last.get("dbt_args") or []),
                last.get("built_at"),
                last.get("changes_up_to"),
            )
        console.print(f"poisonwatch build: skipped, {reason}")
        return BuildResult(False, reason, [], changed, time.monotonic() - started, inputs)
    if not (data_tests_on() if data_tests is None else data_tests):
        args = without_data_tests(args)
    console.print(f"poisonwatch build: {reason}\n  dbt {' '.join(args)}")
    run_dbt(
        args,
        target=name,
        console=console,
        changed_since=_bound(last, args),
        batches_since=_batch_bound(last, args),
    )
    record_build(name, inputs, args)
    return BuildResult(True, reason, args, changed, time.monotonic() - started, inputs)


def _bound(last: dict[str, Any] | None, args: list[str]) -> str | None:
    """The stamp a build's incremental models read after: the last recorded build's, for a
    build of what is downstream of new input only. None for the whole production selector
    (the first build, a changed project: a model that did not run in the recorded builds may
    be behind it), for anything but a stamp, and for a stamp not older than now (a clock
    set back): the models then take their own rows' newest stamp."""
    from poisonwatch.warehouse.dbtrun import STAMP_FORMAT

    stamp = (last or {}).get("changes_up_to")
    if "--selector" in args or not isinstance(stamp, str) or not STAMP.fullmatch(stamp):
        return None
    now = datetime.now(UTC).strftime(STAMP_FORMAT)
    return stamp if stamp < now else None


def _batch_bound(last: dict[str, Any] | None, args: list[str]) -> str | None:
    """The newest landing batch the last recorded build had seen, for a build of what is
    downstream of new input: its scoped data tests check the batches landed after it (batch
    ids sort after every committed one). None for the whole selector: every row."""
    if last is None or "--selector" in args:
        return None
    batches = [
        entry[1]
        for entry in (last.get("datasets") or {}).values()
        if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], str)
    ]
    valid = [b for b in batches if BATCH_RE.fullmatch(b)]
    return max(valid) if valid and len(valid) == len(batches) else None


def record_build(target: str | None, inputs: BuildInputs, dbt_args: list[str]) -> None:
    """Record a successful build that covered `inputs` (read before it started) as the
    production build's, with the stamp its models wrote (the last dbt invocation here), so
    the next `poisonwatch build` goes on from it. `dbt_args` must select everything
    downstream of what they run."""
    from poisonwatch.warehouse.dbtrun import last_invocation_stamp

    name = target_name(target)
    # The store lock keeps other writers out, and a build writes no ledger row (its
    # on-run-start hook only creates missing ledgers empty): the versions now go with the
    # figures read before it.
    inputs.delta_versions = _ledger_versions(name)
    save_state(name, inputs, dbt_args, changes_up_to=last_invocation_stamp())


def _local_warehouse(name: str) -> Path | None:
    """The warehouse folder of an embedded (`method: session`) target; None for others."""
    from poisonwatch.config import load_profile, spark_conf

    warehouse = spark_conf(name).get("spark.sql.warehouse.dir")
    if load_profile(name).get("method") != "session" or not warehouse:
        return None
    return Path(warehouse)


def _ledger_versions(name: str) -> dict[str, int]:
    """The embedded store's Delta ledgers' log versions ({} elsewhere, or on Parquet)."""
    warehouse = _local_warehouse(name)
    if warehouse is None:
        return {}
    return delta_log_versions(_ledger_folders(warehouse, project_root())) or {}


def skip_without_spark(target: str | None = None) -> BuildResult | None:
    """On the embedded default: when the ledgers' files show nothing new since the last
    production build, say so and return the skipped result, without starting Spark; else None."""
    name = target_name(target)
    started = time.monotonic()
    warehouse = _local_warehouse(name)
    last = load_state(name)
    if warehouse is None or last is None:
        return None
    inputs = read_inputs_from_files(warehouse, last=last)
    if inputs is None:
        return None
    args, reason, changed = plan_build(inputs, last)
    if args is not None:
        return None
    seconds = time.monotonic() - started
    Console(stderr=True).print(f"poisonwatch build: skipped, {reason} (no Spark started)")
    return BuildResult(False, reason, [], changed, seconds, inputs)


def run_build(
    target: str | None = None,
    full_refresh: bool = False,
    first: Callable[[Any], object] | None = None,
) -> BuildResult:
    """`poisonwatch build`: connect to the target and run `production_build` in that session.

    On the embedded default the "nothing new" check reads the ledgers' files first, so a
    build with nothing to do starts no JVM; any change (or any doubt) goes through Spark.
    `first(engine)` runs before the build in the same session (`build --ingest`: the landing's
    ingest); then Spark starts whatever the ledgers say, and the build decides as usual."""
    from poisonwatch.warehouse.engine import connect

    if first is None and not full_refresh and (skipped := skip_without_spark(target)) is not None:
        return skipped
    with connect(target) as engine:
        if first is not None:
            first(engine)
        result = production_build(engine, target, full_refresh=full_refresh)
    Console(stderr=True).print(f"poisonwatch build: {result.seconds:.1f} s")
    return result
