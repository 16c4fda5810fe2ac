"""`poisonwatch ingest LANDING`: landing files into `raw.<dataset>`, bad records into `raw_rejects`.

One code path for every target: Spark reads, validates and types the records (SQL built in
sql.py and sent through the Engine); Python lists and hashes the files (files.py)
and only ever pulls counts back.

Crash safety: one run = one `_batch_id`; raw tables and `raw_rejects` are partitioned by it and
the ledger `raw.ingested_files` is appended last (the commit point). A run starts by dropping the
partitions of batches that never reached the ledger, so a run killed midway leaves nothing;
it also drops the stage tables (`raw.ingest_stage_<batch>`, a chunk's validated records) such
a run left.
dbt reads only committed batches too (macros/utils/committed_batches_filter.sql), so a build
between a killed run and the next one never sees the killed run's rows.
One ingest at a time per store: a run holds a file lock beside the raw database's folder (or in
$POISONWATCH_HOME when that folder is not on this machine) from before it drops anything until
its commit; a second run is refused, naming the first.
Spark reads copies made while the files were hashed (files.py), kept under the same place until
the run commits.
Idempotency: a file whose content hash is in the ledger is skipped. Overlapping exports: a
record whose natural key (sql.DEDUP_KEYS) is already in the raw table, or earlier in the run, is
dropped and counted per file (`duplicates`); only the raw rows in the new records' time range
are read for that.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from poisonwatch.config import (
    PoisonwatchError,
    crash_point,
    home,
    local_path,
    release_file_lock,
    take_file_lock,
)
from poisonwatch.ingest.files import Landing, LandingFile, prepare, scan_landing
from poisonwatch.ingest.sql import (
    DEDUP_KEYS,
    csv_source,
    duplicates_query,
    ident,
    jsonl_source,
    parquet_problems,
    parquet_source,
    source_of,
    sql_path,
    sql_string,
    stage_query,
    typed_col,
)
from poisonwatch.textsafe import terminal
from poisonwatch.warehouse.engine import Engine
from poisonwatch.warehouse.partitions import drop_partitions, partition_values_by_table
from poisonwatch.warehouse.schemas import (
    BATCH_RE,
    DATASETS,
    LEDGER_TABLE,
    RAW_DATABASE,
    REJECTS_TABLE,
    Dataset,
    create_raw_tables,
)

# A chunk's validated, typed records: a Parquet table in the raw database, `ingest_stage_`
# and the run's batch id, written once and read four times (bounds, duplicates, counts,
# insert), then dropped: a Parquet table reads faster than the same rows cached in memory. A
# name per run: a run killed while it wrote the stage may leave files that no table owns, and
# the next run must not write into them.
STAGE_PREFIX = "ingest_stage_"
DUPLICATES = "pw_ingest_duplicates"
# Files of one dataset and format read by one Spark job (bounded by count and by bytes).
CHUNK_FILES = 200
CHUNK_BYTES = 1 << 30
GZ_EXPANSION = 8
PROGRESS_MIN_FILES = 20
# Beside the raw database's tables; names starting with `_` are no table's and no restore's.
LOCK_FILE = "_ingest.lock"
COPIES_FOLDER = "_ingest_copies"
# Each file is read as one Spark partition, so line numbers are partition row indexes.
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.files.maxPartitionBytes": str(1 << 40),
}


@dataclass
class DatasetSummary:
    files_loaded: int = 0
    files_skipped: int = 0
    files_failed: int = 0
    records_loaded: int = 0
    records_rejected: int = 0
    blank_lines: int = 0
    duplicates: int = 0


@dataclass
class FileResult:
    file: LandingFile
    loaded: int = 0
    rejected: int = 0
    blank: int = 0
    duplicates: int = 0  # valid records already loaded (natural key): counted once
    failure: str | None = None  # file-level reject reason


@dataclass
class IngestSummary:
    landing: Path
    batch_id: str
    datasets: dict[str, DatasetSummary] = field(default_factory=dict)
    unknown_folders: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    cleaned_batches: list[str] = field(default_factory=list)
    duplicate_files: list[tuple[str, int]] = field(default_factory=list)  # (file, dropped)
    seconds: float = 0.0

    def dataset(self, name: str) -> DatasetSummary:
        return self.datasets.setdefault(name, DatasetSummary())

    @property
    def records_loaded(self) -> int:
        return sum(d.records_loaded for d in self.datasets.values())

    @property
    def rejected_total(self) -> int:
        """Rows this run wrote to raw_rejects: bad records plus failed files."""
        return sum(d.records_rejected + d.files_failed for d in self.datasets.values())


# ---------------------------------------------------------------------------------------------
# Engine helpers
# ---------------------------------------------------------------------------------------------


def error_text(exc: BaseException, limit: int = 300) -> str:
    """The root cause of a Spark error in one line (no JVM stack trace)."""
    origin = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    messages: list[str] = []
    while origin is not None and len(messages) < 20:
        try:
            name = str(origin.getClass().getSimpleName())
            messages.append(f"{name}: {origin.getMessage()}")
            origin = origin.getCause()
        except Exception:
            break
    if messages:
        text = messages[-1]
    else:  # e.g. the Thrift server's error: keep its last "SomeException: message"
        found = re.findall(r"(\w+(?:Exception|Error): [^\n]+)", str(exc))
        text = found[-1] if found else str(exc)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


@contextmanager
def quiet_spark_log(engine: Engine) -> Iterator[None]:
    """A corrupt landing file fails a Spark task, which Spark logs with a JVM stack trace; the
    ingest reports it as a reject instead, so keep the local session's log quiet meanwhile."""
    spark = getattr(engine, "spark", None)
    if spark is not None:
        spark.sparkContext.setLogLevel("OFF")
    try:
        yield
    finally:
        if spark is not None:
            spark.sparkContext.setLogLevel("ERROR")


def ensure_tables(engine: Engine) -> set[str]:
    """Create the raw tables unless they all exist (saves ten statements per run); returns
    the tables the raw database held before (none when it was just created)."""
    _, dbs = engine.query(f"show databases like {sql_string(RAW_DATABASE)}")
    if not dbs:  # (`if not exists` alone makes the Hive metastore log a stack trace)
        create_raw_tables(engine)
        return set()
    _, rows = engine.query(f"show tables in {ident(RAW_DATABASE)}")
    have = {str(r[1]) for r in rows}
    if not {*DATASETS, REJECTS_TABLE, LEDGER_TABLE} <= have:
        create_raw_tables(engine)
    return have


@contextmanager
def session_conf(engine: Engine, settings: dict[str, str]) -> Iterator[None]:
    """Set Spark SQL settings for the ingest, and restore them afterwards."""
    previous: dict[str, str] = {}
    for key, value in settings.items():
        _, rows = engine.query(f"set {key}")
        previous[key] = str(rows[0][1]) if rows else "<undefined>"
        engine.execute(f"set {key}={value}")
    try:
        yield
    finally:
        for key, value in previous.items():
            if value == "<undefined>":
                engine.execute(f"reset {key}")
            else:
                engine.execute(f"set {key}={value}")


def _table(name: str) -> str:
    return f"{ident(RAW_DATABASE)}.{ident(name)}"


class IngestBusyError(PoisonwatchError):
    """Another ingest holds the store's ingest lock."""


def ingest_place(engine: Engine) -> Path:
    """Where the run's lock and copies live: the raw database's folder when it is a folder of
    this machine that this user may write (the local target, and the cluster on 127.0.0.1,
    whose executors read it), else $POISONWATCH_HOME."""
    _, rows = engine.query(f"describe database extended {ident(RAW_DATABASE)}")
    location = next((str(r[1]) for r in rows if str(r[0]).strip().lower() == "location"), "")
    if location.startswith("file:"):
        folder = local_path(location)
        if folder.is_dir() and os.access(folder, os.W_OK | os.X_OK):
            return folder
    folder = home()
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextmanager
def ingest_lock(place: Path) -> Iterator[None]:
    """Hold the store's ingest lock (`place`/_ingest.lock, an flock) for the block, or raise
    IngestBusyError naming the run that holds it."""
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
    me = f"`poisonwatch ingest` pid {os.getpid()} on {socket.gethostname()}, started {started}"
    fh, holder = take_file_lock(place / LOCK_FILE, me)
    if fh is None:
        shown = " ".join(holder.split())[:300]
        raise IngestBusyError(
            f"another ingest is running on this store ({shown}); two at once would drop each "
            "other's batches. Wait for it to finish and run this again."
        )
    try:
        yield
    finally:
        release_file_lock(fh)


def ledger_files(engine: Engine) -> tuple[set[str], set[tuple[str, int]]]:
    """The ledger's keys, and the (path, size) of every file it holds."""
    _, rows = engine.query(
        f"select content_hash, source_file, file_bytes from {_table(LEDGER_TABLE)}"
    )
    return {str(r[0]) for r in rows}, {(str(r[1]), int(r[2] or 0)) for r in rows}


def _ts(value: datetime) -> str:
    return f"timestamp'{value.strftime('%Y-%m-%d %H:%M:%S.%f')}'"


def new_batch_id(now: datetime, after: str | None = None) -> str:
    """`b<UTC time>_<random>`, sorting after `after` (the newest batch id the store has seen).

    Batch ids are the incremental models' watermark (`batch_id > newest taken`,
    macros/incremental/unprocessed_batches_condition.sql), so a new batch must sort after every
    earlier one even when two runs start in the same second or the clock stepped back: its time
    is then one second past `after`'s.
    """
    stamp = now.replace(microsecond=0)
    if after is not None and BATCH_RE.fullmatch(after):
        floor = datetime.strptime(after[1:16], "%Y%m%dT%H%M%S") + timedelta(seconds=1)
        stamp = max(stamp, floor)
    return f"b{stamp.strftime('%Y%m%dT%H%M%SZ')}_{uuid.uuid4().hex[:8]}"


def newest_batch(engine: Engine, also: Iterable[str] = ()) -> str | None:
    """The greatest batch id in the ledger or in `also` (e.g. the orphan batches just dropped)."""
    _, rows = engine.query(f"select max(_batch_id) from {_table(LEDGER_TABLE)}")
    seen = [str(b) for b in [rows[0][0], *also] if b is not None and BATCH_RE.fullmatch(str(b))]
    return max(seen) if seen else None


def drop_orphan_batches(engine: Engine) -> list[str]:
    """Drop partitions of batches that never reached the ledger (a run that crashed)."""
    _, rows = engine.query(f"select distinct _batch_id from {_table(LEDGER_TABLE)}")
    committed = {str(r[0]) for r in rows}
    dropped: set[str] = set()
    tables = [_table(t) for t in [*DATASETS, REJECTS_TABLE]]
    for table, batches in partition_values_by_table(engine, tables, "_batch_id").items():
        orphans = {b for b in batches or [] if BATCH_RE.fullmatch(b) and b not in committed}
        drop_partitions(engine, table, "_batch_id", orphans)
        dropped |= orphans
    return sorted(dropped)


# ---------------------------------------------------------------------------------------------
# Loading one chunk of files (same dataset, same format) with one Spark read
# ---------------------------------------------------------------------------------------------


class ChunkReadError(Exception):
    """Spark could not read the files of a chunk (some file is corrupt)."""


def _is_query_error(exc: BaseException) -> bool:
    """An error in the statement itself (a bug), not in the data it read."""
    text = f"{type(exc).__name__} {error_text(exc, limit=10_000)}"
    if "FAILED_READ_FILE" in str(exc) or "FAILED_READ_FILE" in text:
        return False
    return any(k in text for k in ("AnalysisException", "ParseException", "PARSE_SYNTAX"))


def stage_table(batch_id: str) -> str:
    """The run's stage table, quoted (batch ids are checked against BATCH_RE)."""
    if not BATCH_RE.fullmatch(batch_id):
        raise PoisonwatchError(f"not a batch id: {batch_id!r}")
    return _table(STAGE_PREFIX + batch_id.lower())


def _drop_stage(engine: Engine, stage: str) -> None:
    """Drop the chunk's stage table and its cached duplicates view; dropping a cached temp
    view also frees its cache, so no `uncache table` first."""
    engine.execute(f"drop view if exists {DUPLICATES}")
    engine.execute(f"drop table if exists {stage}")


def _remove_stage_files(engine: Engine, batch_id: str) -> None:
    """Remove the files a failed create of the stage left. A file that breaks mid-read (a cut
    gzip) can fail the statement after it began writing, which leaves files at the table's
    location with no table owning them; the chunk's files are then loaded one by one under the
    same stage name, and Spark refuses a managed table on a location that is not empty
    (LOCATION_ALREADY_EXISTS: every file of the chunk would be rejected as unreadable).
    Only a warehouse on the local file system (every target here) is cleaned."""
    _, rows = engine.query(f"describe database extended {ident(RAW_DATABASE)}")
    location = next((str(r[1]) for r in rows if str(r[0]).strip().lower() == "location"), "")
    if location.startswith("file:"):
        shutil.rmtree(local_path(location) / (STAGE_PREFIX + batch_id.lower()), True)


def drop_stale_stages(engine: Engine, raw_tables: set[str]) -> None:
    """Drop the stage tables runs that were killed left behind (`raw_tables`: the tables of
    the raw database, as ensure_tables listed them)."""
    engine.execute(f"drop view if exists {DUPLICATES}")
    for name in sorted(t for t in raw_tables if t.startswith(STAGE_PREFIX)):
        engine.execute(f"drop table if exists {_table(name)}")


def _find_duplicates(engine: Engine, dataset: Dataset, stage: str) -> bool:
    """Cache the (_fid, _rec) of the stage's records already loaded (natural key, README
    "Landing contract"); False when the dataset has no key or the stage no valid record."""
    if dataset.name not in DEDUP_KEYS:
        return False
    time_col = typed_col(DEDUP_KEYS[dataset.name][0])
    _, rows = engine.query(
        f"select cast(min({time_col}) as string), cast(max({time_col}) as string) "
        f"from {stage} where not _blank and _err is null"
    )
    if not rows or rows[0][0] is None:
        return False
    low, high = (f"timestamp{sql_string(str(v))}" for v in rows[0])
    query = duplicates_query(dataset, stage, _table(dataset.name), low, high)
    engine.execute(f"cache table {DUPLICATES} as {query}")
    return True


def _source_sql(fid: int, f: LandingFile, dataset: Dataset, parquet_cols: dict[str, str]) -> str:
    if f.fmt == "jsonl":
        return jsonl_source(fid, f.read_source, dataset)
    if f.fmt == "csv":
        return csv_source(fid, f.read_source, dataset, f.csv_header or [], f.open_last_line)
    return parquet_source(fid, f.read_source, dataset, parquet_cols)


def _named(text: str, f: LandingFile) -> str:
    """An error text about the copy of `f`, naming the landing file instead."""
    return text.replace(f.read_source, f.source) if f.copy is not None else text


def load_chunk(
    engine: Engine,
    dataset: Dataset,
    files: Sequence[LandingFile],
    parquet_cols: dict[Path, dict[str, str]],
    batch_id: str,
    now: datetime,
) -> list[FileResult]:
    """Read, validate and insert the files of one chunk; returns per-file counts."""
    sources = [
        _source_sql(i, f, dataset, parquet_cols.get(f.path, {})) for i, f in enumerate(files)
    ]
    stage = stage_table(batch_id)
    try:
        engine.execute(f"create table {stage} using parquet as {stage_query(dataset, sources)}")
    except Exception as exc:
        _drop_stage(engine, stage)
        _remove_stage_files(engine, batch_id)
        if _is_query_error(exc):
            raise PoisonwatchError(f"ingest of {dataset.name}: {error_text(exc)}") from exc
        raise ChunkReadError(error_text(exc)) from exc
    try:
        dedup = _find_duplicates(engine, dataset, stage)
        rows_sql = f"{stage} s"
        is_dup = "false"
        if dedup:
            rows_sql += f" left join {DUPLICATES} d on s._fid = d._fid and s._rec = d._rec"
            is_dup = "d._fid is not null"
        _, rows = engine.query(
            f"select s._fid, count_if(s._blank), "
            f"count_if(not s._blank and s._err is null and not ({is_dup})), "
            f"count_if(s._err is not null), count_if({is_dup}) from {rows_sql} group by s._fid"
        )
        results = [FileResult(file=f) for f in files]
        for fid, blank, loaded, rejected, duplicates in rows:
            r = results[int(fid)]
            r.blank, r.loaded, r.rejected = int(blank), int(loaded), int(rejected)
            r.duplicates = int(duplicates)
        partition = f"partition (_batch_id = {sql_string(batch_id)})"
        names = [f.source for f in files]
        if any(r.loaded for r in results):
            cols = ", ".join(f"s.{typed_col(c.name)}" for c in dataset.columns)
            engine.execute(
                f"insert into {_table(dataset.name)} {partition} "
                f"select {cols}, {source_of(names, 's._fid')}, s._rec, {_ts(now)} from {rows_sql} "
                f"where not s._blank and s._err is null and not ({is_dup})"
            )
        if any(r.rejected for r in results):
            engine.execute(
                f"insert into {_table(REJECTS_TABLE)} {partition} "
                f"select {sql_string(dataset.name)}, {source_of(names)}, _rec, _err.field, "
                f"_err.reason, _text, {_ts(now)} from {stage} where _err is not null"
            )
    finally:
        _drop_stage(engine, stage)
    return results


def load_files(
    engine: Engine,
    dataset: Dataset,
    files: Sequence[LandingFile],
    parquet_cols: dict[Path, dict[str, str]],
    batch_id: str,
    now: datetime,
) -> list[FileResult]:
    """Load a chunk; if Spark cannot read it, load its files one by one to find the bad ones."""
    try:
        return load_chunk(engine, dataset, files, parquet_cols, batch_id, now)
    except ChunkReadError as exc:
        if len(files) == 1:
            failure = f"unreadable file: {_named(str(exc), files[0])}"
            return [FileResult(file=files[0], failure=failure)]
    results: list[FileResult] = []
    for f in files:
        results.extend(load_files(engine, dataset, [f], parquet_cols, batch_id, now))
    return results


def chunks(files: Sequence[LandingFile]) -> Iterator[list[LandingFile]]:
    """Groups of files for one Spark read, bounded by count and (uncompressed) size."""
    chunk: list[LandingFile] = []
    size = 0
    for f in files:
        weight = f.size * (GZ_EXPANSION if f.path.name.endswith(".gz") else 1)
        if chunk and (len(chunk) >= CHUNK_FILES or size + weight > CHUNK_BYTES):
            yield chunk
            chunk, size = [], 0
        chunk.append(f)
        size += weight
    if chunk:
        yield chunk


def parquet_schema(engine: Engine, f: LandingFile) -> dict[str, str]:
    _, rows = engine.query(f"describe query select * from {sql_path('parquet', f.read_source)}")
    return {str(r[0]): str(r[1]) for r in rows}


# ---------------------------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------------------------


def _plan(
    landing: Landing, done: set[str], summary: IngestSummary
) -> tuple[list[LandingFile], list[FileResult]]:
    """Split files into to-load and failed; count the skipped ones (ledger or same content)."""
    seen: set[str] = set()
    to_load: list[LandingFile] = []
    failed: list[FileResult] = []
    for f in landing.files:
        if f.ledger_key in done or f.ledger_key in seen:
            summary.dataset(f.dataset).files_skipped += 1
            continue
        seen.add(f.ledger_key)
        if f.problem is not None:
            failed.append(FileResult(file=f, failure=f.problem))
        else:
            to_load.append(f)
    return to_load, failed


def _record(summary: IngestSummary, results: Iterable[FileResult]) -> None:
    for r in results:
        d = summary.dataset(r.file.dataset)
        if r.failure is not None:
            d.files_failed += 1
            continue
        d.files_loaded += 1
        d.records_loaded += r.loaded
        d.records_rejected += r.rejected
        d.blank_lines += r.blank
        d.duplicates += r.duplicates
        if r.duplicates:
            summary.duplicate_files.append((r.file.source, r.duplicates))


def _write_file_rejects(
    engine: Engine, failed: Sequence[FileResult], batch_id: str, now: datetime
) -> None:
    if not failed:
        return
    rows = ",\n".join(
        f"({sql_string(r.file.dataset)}, {sql_string(r.file.source)}, cast(null as bigint), "
        f"cast(null as string), {sql_string(r.failure or '')}, cast(null as string), {_ts(now)})"
        for r in failed
    )
    engine.execute(
        f"insert into {_table(REJECTS_TABLE)} partition (_batch_id = {sql_string(batch_id)}) "
        f"values {rows}"
    )


def _write_ledger(
    engine: Engine, results: Sequence[FileResult], batch_id: str, now: datetime
) -> None:
    """Append the ledger rows: the commit point of the run."""
    if not results:
        return
    rows = ",\n".join(
        f"({sql_string(r.file.ledger_key)}, {sql_string(r.file.dataset)}, "
        f"{sql_string(r.file.source)}, {r.file.size}, {r.loaded}, "
        f"{1 if r.failure is not None else r.rejected}, {_ts(now)}, {sql_string(batch_id)})"
        for r in results
    )
    engine.execute(f"insert into {_table(LEDGER_TABLE)} values {rows}")


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )


def ingest(engine: Engine, landing: Path, console: Console | None = None) -> IngestSummary:
    """Load every landing file not yet ingested; returns what happened, per dataset."""
    root = landing.expanduser().resolve()
    if not root.is_dir():
        raise PoisonwatchError(f"landing folder {landing} does not exist or is not a folder")
    started = time.monotonic()
    now = datetime.now(UTC).replace(tzinfo=None)
    summary = IngestSummary(landing=root, batch_id="")
    console = console or Console(stderr=True)
    with session_conf(engine, SESSION_CONF), quiet_spark_log(engine):
        raw_tables = ensure_tables(engine)
        place = ingest_place(engine)
        with ingest_lock(place):
            crash_point("ingest_locked")
            drop_stale_stages(engine, raw_tables)
            summary.cleaned_batches = drop_orphan_batches(engine)
            summary.batch_id = new_batch_id(now, newest_batch(engine, summary.cleaned_batches))
            # Copies left by killed runs go too: only the run holding the lock uses them.
            shutil.rmtree(place / COPIES_FOLDER, ignore_errors=True)
            copies = place / COPIES_FOLDER / summary.batch_id
            try:
                _run(engine, root, copies, summary, now, console)
            finally:
                shutil.rmtree(copies, ignore_errors=True)
    summary.seconds = time.monotonic() - started
    return summary


def _run(
    engine: Engine,
    root: Path,
    copies: Path,
    summary: IngestSummary,
    now: datetime,
    console: Console,
) -> None:
    """Scan, hash and copy, load, and commit (the ledger, last)."""
    found = scan_landing(root)
    summary.unknown_folders, summary.ignored = found.unknown_folders, found.ignored
    show = len(found.files) >= PROGRESS_MIN_FILES
    done, loaded_files = ledger_files(engine)
    with _progress(console) as progress:
        task = progress.add_task("hashing", total=len(found.files), visible=show)
        prepare(found, copies, done, loaded_files, lambda _f: progress.advance(task))
        to_load, failed = _plan(found, done, summary)
        task = progress.add_task("loading", total=len(to_load), visible=show)
        loaded = _load_all(engine, to_load, failed, summary.batch_id, now, progress, task)
    results = loaded + failed
    _record(summary, results)
    _write_file_rejects(engine, failed, summary.batch_id, now)
    crash_point("ingest_before_ledger")
    _write_ledger(engine, results, summary.batch_id, now)


def _load_all(
    engine: Engine,
    to_load: Sequence[LandingFile],
    failed: list[FileResult],
    batch_id: str,
    now: datetime,
    progress: Progress,
    task: object,
) -> list[FileResult]:
    """Load the files dataset by dataset, format by format; failed files go to `failed`."""
    results: list[FileResult] = []
    for name in sorted({f.dataset for f in to_load}):
        dataset = DATASETS[name]
        for fmt in ("jsonl", "csv", "parquet"):
            files = [f for f in to_load if f.dataset == name and f.fmt == fmt]
            parquet_cols: dict[Path, dict[str, str]] = {}
            if fmt == "parquet":
                files = _check_parquet(engine, dataset, files, parquet_cols, failed)
            for chunk in chunks(files):
                for r in load_files(engine, dataset, chunk, parquet_cols, batch_id, now):
                    (failed if r.failure is not None else results).append(r)
                progress.advance(task, len(chunk))  # type: ignore[arg-type]
    return results


def _check_parquet(
    engine: Engine,
    dataset: Dataset,
    files: Sequence[LandingFile],
    parquet_cols: dict[Path, dict[str, str]],
    failed: list[FileResult],
) -> list[LandingFile]:
    """Read each Parquet footer; unreadable files and unusable schemas are file-level rejects."""
    ok: list[LandingFile] = []
    for f in files:
        try:
            cols = parquet_schema(engine, f)
        except Exception as exc:
            failure = f"unreadable file: {_named(error_text(exc), f)}"
            failed.append(FileResult(file=f, failure=failure))
            continue
        problem = parquet_problems(dataset, cols)
        if problem is not None:
            failed.append(FileResult(file=f, failure=problem))
            continue
        parquet_cols[f.path] = cols
        ok.append(f)
    return ok


def print_summary(summary: IngestSummary, console: Console | None = None) -> None:
    """The per-dataset summary as a table, then what was not loaded and why."""
    console = console or Console()
    table = Table(
        title=f"ingest {summary.landing}\nbatch {summary.batch_id}",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        collapse_padding=True,
        caption="files: loaded / skip (already ingested) / failed (whole file rejected); "
        "dupes: records already loaded from another file (counted once)",
    )
    table.add_column("dataset", no_wrap=True)
    for header in ("files", "skip", "failed", "records", "rejects", "dupes", "blank"):
        table.add_column(header, justify="right", no_wrap=True)
    for name in sorted(summary.datasets):
        d = summary.datasets[name]
        label = name if name in DATASETS else f"{terminal(name)} [red](unknown)[/red]"
        table.add_row(
            label,
            str(d.files_loaded),
            str(d.files_skipped),
            f"[red]{d.files_failed}[/red]" if d.files_failed else "0",
            f"{d.records_loaded:,}",
            f"[red]{d.records_rejected:,}[/red]" if d.records_rejected else "0",
            f"{d.duplicates:,}",
            f"{d.blank_lines:,}",
        )
    console.print(table)
    rate = summary.records_loaded / summary.seconds if summary.seconds else 0.0
    console.print(
        f"{summary.records_loaded:,} records loaded in {summary.seconds:.1f}s "
        f"({rate:,.0f}/s); {summary.rejected_total:,} row(s) written to "
        f"{RAW_DATABASE}.{REJECTS_TABLE}."
    )
    if summary.unknown_folders:
        console.print(
            "[yellow]unknown dataset folder(s) (files kept in raw_rejects):[/yellow] "
            + ", ".join(terminal(f) for f in summary.unknown_folders)
        )
    if summary.ignored:
        console.print(
            f"[dim]ignored {len(summary.ignored)} file(s) outside dataset folders or hidden: "
            + ", ".join(terminal(Path(p).name) for p in summary.ignored[:5])
            + (" …" if len(summary.ignored) > 5 else "")
            + "[/dim]"
        )
    if summary.cleaned_batches:
        console.print(
            "[yellow]dropped the partial data of interrupted run(s):[/yellow] "
            + ", ".join(summary.cleaned_batches)
        )
    if summary.duplicate_files:
        dropped = sum(n for _, n in summary.duplicate_files)
        console.print(
            f"dropped {dropped:,} duplicate record(s) already loaded from other files "
            '(natural key, README "Landing contract"):'
        )
        for source, n in summary.duplicate_files:
            console.print(f"  {terminal(source)}: {n:,}", soft_wrap=True)
