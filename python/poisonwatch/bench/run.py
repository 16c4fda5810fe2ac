"""`poisonwatch bench`: how long the pipeline takes per workload size, next to its floors.

For each size N the parent process generates about N × 1.01 attempts, moves about 1 % of them (the
newest files, plus one older file: late-arriving data) into a delta landing folder, and runs a
child process per phase — one store per size, a fresh Spark driver per phase — that times:

    history: ingest → floor (one scan and aggregate of the raw attempts) → sequence floor (one
        sort per message, plain PySpark) → ingest floor (plain Spark read + Parquet write of the
        landing files) → poisonwatch build --full-refresh
    delta: ingest the delta
    increment: poisonwatch build (incremental) → poisonwatch build (nothing new) → plan → apply

The delta's ingest and the incremental build each start their own driver, as `poisonwatch ingest`
and `poisonwatch build` do when they run one after the other (see PHASES). The children read
their driver JVM's peak resident memory and each build's ten slowest dbt nodes. The
parent adds derived figures and machine facts, merges them into `bench/results.json` (one object
per size) and prints them as tables (also written as Markdown to `bench/results.md`).

The child is `python -m poisonwatch.bench --worker …`; speed goals are not asserted anywhere.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from poisonwatch.bench.procs import java_descendants, vm_hwm_mib
from poisonwatch.bench.serve import SERVE_COLUMNS, serve_phase, serve_rows
from poisonwatch.config import PoisonwatchError, check_java, home, project_root

DEFAULT_SIZES = (100_000, 1_000_000, 10_000_000)
ATTEMPT_DATASETS = ("ssb_receive_attempts", "jms_receive_attempts")
LATE_DATASET = "ssb_receive_attempts"  # one older file of it arrives with the delta
DELTA_SHARE = 0.01  # the delta holds about 1 % of N attempts
MIN_FILES_FOR_DELTA = 4  # other datasets give their newest file to the delta from 4 files up
# Builds are the production command (`poisonwatch build`: `dbt build --selector production`, as
# far as new input reaches): unit tests check logic on fixed rows, cost the same at every data
# size, and run in `make test`. `--no-data-tests` also leaves out data tests, for a quick check
# that the benchmark runs (its figures are marked and not comparable with full rows).
PART_RE = re.compile(r"^part-(\d+)\.")
# The child processes per size and the steps each times. Production runs `poisonwatch ingest` and
# then `poisonwatch build` after every landing, each in a driver JVM of its own, so the increment
# is timed that way: in the full build's process (JIT-compiled Spark, warm caches) it would look
# cheaper than what users pay. Rows without `incremental_build_process` were timed in that warm
# process ("warm"); the tables mark them.
PHASES = {
    "history": ("ingest", "floor", "floor_sequence", "floor_ingest", "full_build"),
    "delta": ("incremental_ingest",),
    "increment": ("incremental_build", "no_data_build", "plan", "apply"),
}
INCREMENTAL_BUILD_PROCESS = "fresh"
WARM_MARK = "†"  # an incremental build timed in the full build's process
STEPS = tuple(step for steps in PHASES.values() for step in steps)
# The dbt steps whose ten slowest nodes are recorded (from target/run_results.json).
DBT_STEPS = ("full_build", "incremental_build", "no_data_build")
REQUIRED_KEYS = (
    "attempts",
    "attempts_loaded",
    "incremental_attempts",
    "floor_s",
    "ingest_s",
    "full_build_s",
    "incremental_ingest_s",
    "incremental_build_s",
    "plan_s",
    "apply_s",
    "floor_sequence_s",
    "floor_ingest_s",
    "no_data_build_s",
    "full_over_floor",
    "full_over_floor_sequence",
    "ingest_over_floor_ingest",
    "incremental_over_full",
    "slowest_nodes",
    "peak_rss_mb",
    "generate_s",
    "measured_at",
    "machine",
    "spark_conf",
)

console = Console()


# ---------------------------------------------------------------------------------------------
# The workload: generate, then split off the delta
# ---------------------------------------------------------------------------------------------


def chunk_records_for(attempts: int) -> int:
    """Records per landing file at size N: about 40 attempt files per N (ingest reads each
    file as its own scan, so thousands of tiny files would time file handling, not data)."""
    return max(50, attempts // 40)


def count_records(path: Path) -> int:
    """Records in one landing file: jsonl(.gz) lines, csv rows without the header, parquet rows."""
    name = path.name
    if name.endswith(".parquet"):
        import pyarrow.parquet as pq

        return int(pq.ParquetFile(path).metadata.num_rows)
    if name.endswith(".csv"):
        with path.open(newline="", encoding="utf-8") as fh:
            return max(0, sum(1 for _ in csv.reader(fh)) - 1)
    if name.endswith((".jsonl", ".jsonl.gz")):
        opener: Callable[[Path], Any] = gzip.open if name.endswith(".gz") else open
        count, last = 0, b"\n"
        with opener(path, "rb") as fh:
            while block := fh.read(1 << 20):
                count += block.count(b"\n")
                last = block[-1:]
        return count + (last != b"\n")  # a last line without its newline
    raise PoisonwatchError(f"{path}: not a landing file (.jsonl, .jsonl.gz, .csv, .parquet)")


def part_files(folder: Path) -> list[Path]:
    """The `part-NNNNN.*` files of a dataset folder, oldest (lowest number) first."""
    if not folder.is_dir():
        return []
    found = [(int(m.group(1)), p) for p in folder.iterdir() if (m := PART_RE.match(p.name))]
    return [p for _, p in sorted(found)]


@dataclass
class Split:
    """What `split_delta` moved: per dataset, the delta files and their records."""

    attempts_total: int = 0
    attempts_loaded: int = 0
    incremental_attempts: int = 0
    moved: dict[str, list[str]] = field(default_factory=dict)
    moved_records: dict[str, int] = field(default_factory=dict)
    late_file: str | None = None


def _open_lines(path: Path, mode: str) -> Any:
    return gzip.open(path, mode) if path.name.endswith(".gz") else path.open(mode)


def move_tail_lines(src: Path, dst: Path, lines: int, total: int) -> None:
    """Move the last `lines` of the `total` lines of a jsonl(.gz) file into `dst` (same format)."""
    keep = total - lines
    tmp = src.with_name(src.name + ".tmp")
    with (
        _open_lines(src, "rb") as fh,
        _open_lines(tmp, "wb") as head,
        _open_lines(dst, "wb") as tail,
    ):
        for number, line in enumerate(fh):
            (head if number < keep else tail).write(line if line.endswith(b"\n") else line + b"\n")
    tmp.replace(src)


def _move_attempts(
    files: list[Path], counts: dict[Path, int], target: Path, late: bool, delta_share: float
) -> tuple[int, list[str], str | None]:
    """Move about `delta_share` × N of a dataset's attempts into `target`: the newest lines
    (whole files while they fit, then the tail of the next), and when `late` a fifth of the
    share from the tail of a file in the middle of history. Returns (records moved, names, late
    file)."""
    total = sum(counts[f] for f in files)
    share = round(total * delta_share / (1 + delta_share))  # of N, not of N × (1 + share)
    late_lines = share // 5 if late and len(files) >= 3 else 0
    remaining = max(1, share - late_lines)
    moved, names = 0, []
    target.mkdir(parents=True, exist_ok=True)
    middle = files[len(files) // 2] if late_lines else None
    for f in reversed(files):
        if remaining <= 0 or f == middle:
            break
        if counts[f] <= remaining:
            f.rename(target / f.name)
            take = counts[f]
        else:
            move_tail_lines(f, target / f.name, remaining, counts[f])
            take = remaining
        moved, remaining = moved + take, remaining - take
        names.append(f.name)
    late_name = None
    if middle is not None:
        name = "late-" + middle.name
        move_tail_lines(middle, target / name, late_lines, counts[middle])
        moved += late_lines
        names.append(name)
        late_name = f"{target.name}/{middle.name}"
    return moved, sorted(names), late_name


def split_delta(
    landing: Path,
    delta: Path,
    delta_share: float = DELTA_SHARE,
    min_files: int = MIN_FILES_FOR_DELTA,
) -> Split:
    """Move about `delta_share` (1 %) of the attempts (the newest ones, plus late-arriving ones
    from the middle of history) and the newest file of the other datasets that have at least
    `min_files` (four) files from `landing` into `delta`, keeping the folder layout."""
    if not 0 < delta_share < 1:
        raise PoisonwatchError(
            f"the delta's share of the attempts must be in (0, 1), got {delta_share}"
        )
    split = Split()
    for dataset_dir in sorted(p for p in landing.iterdir() if p.is_dir()):
        dataset = dataset_dir.name
        files = part_files(dataset_dir)
        target = delta / dataset
        if dataset in ATTEMPT_DATASETS:
            counts = {f: count_records(f) for f in files}
            split.attempts_total += sum(counts.values())
            moved, names, late = _move_attempts(
                files, counts, target, late=dataset == LATE_DATASET, delta_share=delta_share
            )
            split.late_file = late or split.late_file
            split.moved[dataset], split.moved_records[dataset] = names, moved
            split.incremental_attempts += moved
            continue
        chosen = files[-1:] if len(files) >= min_files else []
        if not chosen:
            continue
        target.mkdir(parents=True, exist_ok=True)
        split.moved_records[dataset] = sum(count_records(f) for f in chosen)
        for f in chosen:
            f.rename(target / f.name)
        split.moved[dataset] = sorted(f.name for f in chosen)
    split.attempts_loaded = split.attempts_total - split.incremental_attempts
    return split


# ---------------------------------------------------------------------------------------------
# Peak memory of the Spark driver
# ---------------------------------------------------------------------------------------------


def driver_peak_rss_mib() -> float | None:
    """The Spark driver JVM's peak RSS so far (the largest java process below this one)."""
    peaks = [p for pid in java_descendants(os.getpid()) if (p := vm_hwm_mib(pid)) is not None]
    return max(peaks) if peaks else None


# ---------------------------------------------------------------------------------------------
# The child: every step in one SparkSession
# ---------------------------------------------------------------------------------------------


def floor_sql() -> str:
    """The least work any pipeline over the attempts must do: per message, count its attempts
    and failures and find its last attempt, over both attempt tables. The outer aggregate reads
    every inner column, so Spark cannot prune the per-message aggregates away."""
    ssb = (
        "select count(*) as n, count_if(outcome <> 'committed') as f, max(attempted_at) as t "
        "from raw.ssb_receive_attempts group by server_name, database_name, queue_name, "
        "conversation_handle, message_sequence_number"
    )
    jms = (
        "select count(*) as n, count_if(outcome <> 'acknowledged') as f, "
        "max(attempted_at) as t from raw.jms_receive_attempts "
        "group by broker_name, queue_name, message_id"
    )
    return (
        f"select count(*) as messages, sum(n) as attempts, sum(f) as failures, max(t) as last "
        f"from ({ssb} union all {jms})"
    )


SEQUENCED_TABLE = "poisonwatch_intermediate.int_receive_attempts_sequenced"
REWRITE_KEYS = tuple(
    f"incremental_{k}_attempts" for k in ("sequenced", "new", "touched", "rewritten")
)


def rewrite_sql(batch_id: str) -> str:
    """What the last build of the attempts table rewrote, against what it had to: all
    attempts; the attempts of landing batch `batch_id` (the delta); all attempts of the
    messages that batch touched (the least an exact per-message rewrite must write); and the
    attempts carrying the newest `sequenced_at` (the build gives it to every row of the
    partitions it overwrites)."""
    from poisonwatch.ingest import BATCH_RE

    # Validated, then quoted: the ingest's own pattern of its batch ids.
    if not BATCH_RE.fullmatch(batch_id):
        raise PoisonwatchError(f"not an ingest batch id: {batch_id!r}")
    return f"""
        with per_message as (
            select
                count(*) as attempts,
                count_if(batch_id = '{batch_id}') as new_attempts,
                count_if(
                    sequenced_at = (select max(sequenced_at) from {SEQUENCED_TABLE})
                ) as rewritten_attempts
            from {SEQUENCED_TABLE}
            group by message_key
        )

        select
            sum(attempts) as attempts,
            sum(new_attempts) as new_attempts,
            sum(case when new_attempts > 0 then attempts else 0 end) as touched_attempts,
            sum(rewritten_attempts) as rewritten_attempts
        from per_message
    """


def _events(path: Path | None) -> Callable[[dict[str, Any]], None]:
    def emit(event: dict[str, Any]) -> None:
        if path is not None:
            with path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(event) + "\n")

    return emit


def _ingest_checked(engine: Any, landing: Path, expected_attempts: int | None) -> Any:
    from poisonwatch.ingest import ingest, print_summary

    summary = ingest(engine, landing)
    print_summary(summary)
    if summary.rejected_total:
        raise PoisonwatchError(
            f"ingest of {landing} rejected {summary.rejected_total} record(s) or file(s): "
            "the benchmark needs a clean load (see raw.raw_rejects)"
        )
    loaded = sum(summary.dataset(d).records_loaded for d in ATTEMPT_DATASETS)
    if not summary.records_loaded or (
        expected_attempts is not None and loaded != expected_attempts
    ):
        raise PoisonwatchError(
            f"ingest of {landing} loaded {loaded} attempt(s), expected {expected_attempts}"
        )
    return summary


def run_worker(
    landing: Path,
    delta: Path,
    result_path: Path,
    events_path: Path | None = None,
    attempts_loaded: int | None = None,
    incremental_attempts: int | None = None,
    data_tests: bool = True,
    phase: str = "history",
    delta_batch_id: str | None = None,
) -> dict[str, Any]:
    """Run the timed steps of one phase (PHASES) in this process (one SparkSession, shared with
    dbt) and write the figures as JSON to `result_path`. Meant for a fresh process with its own
    POISONWATCH_HOME; the phases of one size run one after the other on the same store.
    `delta_batch_id`: the delta's ingest batch (from the delta phase), for the increment's
    rewrite figures."""
    from poisonwatch.bench.floors import floor_ingest, floor_sequence, parquet_rows, slowest_nodes
    from poisonwatch.remediation import (
        ApplyLock,
        Filters,
        apply_actions,
        load_pending,
        print_plan,
        print_result,
    )
    from poisonwatch.warehouse.build import production_build, skip_without_spark
    from poisonwatch.warehouse.dbtrun import target_path
    from poisonwatch.warehouse.engine import connect

    if phase not in PHASES:
        raise PoisonwatchError(f"unknown bench phase {phase!r}; one of {', '.join(PHASES)}")
    if phase == "increment" and not delta_batch_id:
        raise PoisonwatchError("the increment phase needs the delta's batch id")
    emit = _events(events_path)
    out: dict[str, Any] = {
        "peak_rss_mb_after": {},
        "build_args": {},
        "build_reason": {},
        "slowest_nodes": {},
        "build_spark_free": [],
        "spark_start_s": {},
    }
    out_console = Console()
    floors_dir = home() / "bench-floors"
    run_results = target_path() / "run_results.json"

    @contextmanager
    def step(name: str) -> Iterator[None]:
        emit({"event": "start", "step": name})
        out_console.rule(f"[bold]bench step: {name}")
        yield
        peak = driver_peak_rss_mib()
        out["peak_rss_mb_after"][name] = round(peak, 1) if peak is not None else None
        emit({"event": "done", "step": name, "seconds": out.get(f"{name}_s")})

    def timed(name: str, call: Callable[[], Any]) -> Any:
        started = time.monotonic()
        value = call()
        out[f"{name}_s"] = round(time.monotonic() - started, 3)
        return value

    def build(name: str, engine: Any, full_refresh: bool = False) -> None:
        """Time the production command (as `poisonwatch build` runs it: a check of the ledgers'
        files first, then Spark and dbt); keep its dbt arguments and ten slowest nodes."""
        run_results.unlink(missing_ok=True)

        def call() -> Any:
            if not full_refresh and (skipped := skip_without_spark("local")) is not None:
                out["build_spark_free"].append(name)
                return skipped
            return production_build(
                engine, "local", full_refresh=full_refresh, data_tests=data_tests
            )

        result = timed(name, call)
        out["build_args"][name] = result.dbt_args
        out["build_reason"][name] = result.reason
        out["slowest_nodes"][name] = slowest_nodes(run_results) if result.ran else []

    emit({"event": "start", "step": "spark"})
    started = time.monotonic()
    with connect("local") as engine:
        # Not part of any step's time (as before phases): the driver's start, per phase.
        out["spark_start_s"][phase] = round(time.monotonic() - started, 3)
        spark = engine.spark  # type: ignore[attr-defined]
        emit({"event": "done", "step": "spark"})
        if phase == "history":
            with step("ingest"):
                timed("ingest", lambda: _ingest_checked(engine, landing, attempts_loaded))
            with step("floor"):
                engine.query(floor_sql())  # untimed: warms the session
                _, rows = timed("floor", lambda: engine.query(floor_sql()))
                out["floor_messages"] = int(rows[0][0])
                out["floor_attempts"] = int(rows[0][1] or 0)
            with step("floor_sequence"):
                timed("floor_sequence", lambda: floor_sequence(spark, floors_dir / "sequence"))
                out["floor_sequence_messages"] = parquet_rows(spark, floors_dir / "sequence")
            with step("floor_ingest"):
                timed("floor_ingest", lambda: floor_ingest(spark, landing, floors_dir / "ingest"))
                out["floor_ingest_attempts"] = sum(
                    parquet_rows(spark, floors_dir / "ingest" / d) for d in ATTEMPT_DATASETS
                )
            shutil.rmtree(floors_dir, ignore_errors=True)
            with step("full_build"):
                build("full_build", engine, full_refresh=True)
        elif phase == "delta":
            with step("incremental_ingest"):
                delta_ingest = timed(
                    "incremental_ingest",
                    lambda: _ingest_checked(engine, delta, incremental_attempts),
                )
            out["delta_batch_id"] = delta_ingest.batch_id
        else:
            with step("incremental_build"):
                build("incremental_build", engine)
                # Untimed: how much of the attempts table the +1 % build rewrote (goal 2).
                _, rows = engine.query(rewrite_sql(str(delta_batch_id)))
                out.update({k: int(v or 0) for k, v in zip(REWRITE_KEYS, rows[0], strict=True)})
            with step("no_data_build"):
                build("no_data_build", engine)  # nothing landed since: skipped
            with step("plan"):
                plan = timed("plan", lambda: load_pending(engine, Filters()))
                print_plan(plan, out_console)
                out["planned_actions"] = len(plan.actions)
            with step("apply"):
                lock = ApplyLock()
                lock.acquire_file()
                try:
                    result = timed(
                        "apply",
                        lambda: apply_actions(
                            engine, Filters(), yes=True, lock=lock, console=out_console
                        ),
                    )
                finally:
                    lock.release()
                print_result(result, out_console)
                out["applied_actions"] = sum(result.applied.values())
        sc = spark.sparkContext
        out["spark_conf"] = {
            "spark.master": sc.master,
            "spark.sql.shuffle.partitions": spark.conf.get("spark.sql.shuffle.partitions"),
            "spark.driver.memory": sc.getConf().get("spark.driver.memory", "1g"),
            "spark.sql.adaptive.enabled": spark.conf.get("spark.sql.adaptive.enabled"),
        }
        out["default_parallelism"] = sc.defaultParallelism
        peak = driver_peak_rss_mib()
        if peak is None:
            raise PoisonwatchError("could not find the Spark driver JVM below this process")
        out["peak_rss_mb"] = round(peak, 1)
        out["driver_pids"] = java_descendants(os.getpid())
    out["python_max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    result_path.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    return out


def merge_phases(results: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One size's figures from its phases' results: per-step maps joined, lists concatenated,
    memory peaks the largest, anything else from the last phase that has it."""
    merged: dict[str, Any] = {}
    for result in results:
        for key, value in result.items():
            if isinstance(value, dict) and key != "spark_conf":
                merged.setdefault(key, {}).update(value)
            elif isinstance(value, list):
                merged.setdefault(key, []).extend(value)
            elif key in ("peak_rss_mb", "python_max_rss_mb"):
                merged[key] = max(merged.get(key, value), value)
            else:
                merged[key] = value
    return merged


# ---------------------------------------------------------------------------------------------
# The parent: per size, generate, split, run the child, record
# ---------------------------------------------------------------------------------------------


def _version(package: str) -> str | None:
    try:
        return version(package)
    except PackageNotFoundError:
        return None


def machine_facts() -> dict[str, Any]:
    """Cores, memory, OS, Java, pyspark and dbt versions of this machine."""
    mem_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gib = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "memory_gib": mem_gib,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": check_java().text,
        "pyspark": _version("pyspark"),
        "dbt_core": _version("dbt-core"),
        "dbt_spark": _version("dbt-spark"),
    }


def merge_results(existing: Sequence[dict[str, Any]], new: Sequence[dict[str, Any]]) -> list:
    """Entries of `new` replace those of `existing` with the same `attempts`; sorted by size."""
    by_size = {int(e["attempts"]): dict(e) for e in existing}
    for entry in new:
        by_size[int(entry["attempts"])] = dict(entry)
    return [by_size[k] for k in sorted(by_size)]


def read_results(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(data, list):
        raise PoisonwatchError(f"{path}: expected a JSON list of results")
    return data


def write_results(path: Path, entries: Sequence[dict[str, Any]]) -> None:
    """Write atomically: a reader sees the old list or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(list(entries), indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)


def _derive(entry: dict[str, Any]) -> None:
    entry["full_over_floor"] = round(entry["full_build_s"] / entry["floor_s"], 2)
    entry["full_over_floor_sequence"] = round(entry["full_build_s"] / entry["floor_sequence_s"], 2)
    entry["ingest_over_floor_ingest"] = round(entry["ingest_s"] / entry["floor_ingest_s"], 2)
    entry["incremental_over_full"] = round(entry["incremental_build_s"] / entry["full_build_s"], 3)
    if entry.get("incremental_sequenced_attempts") and entry.get("incremental_touched_attempts"):
        entry["incremental_rewritten_share"] = round(
            entry["incremental_rewritten_attempts"] / entry["incremental_sequenced_attempts"], 4
        )
        entry["incremental_rewrite_amplification"] = round(
            entry["incremental_rewritten_attempts"] / entry["incremental_touched_attempts"], 1
        )


def _child_env(store: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["POISONWATCH_HOME"] = str(store)
    env["POISONWATCH_TARGET"] = "local"
    env["POISONWATCH_PROJECT_DIR"] = str(project_root())
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def _run_child(
    size_dir: Path,
    split: Split,
    log_path: Path,
    status: Any,
    label: str,
    data_tests: bool = True,
    phase: str = "history",
    delta_batch_id: str | None = None,
) -> dict[str, Any]:
    """Run one phase of the worker in a fresh process, echoing its steps; return its figures.
    The history phase starts from an empty store; the later ones continue on it."""
    store = size_dir / "store"
    if phase == "history":
        shutil.rmtree(store, ignore_errors=True)
    result_path = size_dir / f"child-result-{phase}.json"
    events_path = size_dir / f"child-events-{phase}.jsonl"
    events_path.write_text("")
    cmd = [
        sys.executable,
        "-m",
        "poisonwatch.bench",  # bench/__main__.py
        "--worker",
        "--landing",
        str(size_dir / "landing"),
        "--delta",
        str(size_dir / "delta"),
        "--result",
        str(result_path),
        "--events",
        str(events_path),
        "--attempts-loaded",
        str(split.attempts_loaded),
        "--incremental-attempts",
        str(split.incremental_attempts),
        "--phase",
        phase,
        *(["--delta-batch-id", delta_batch_id] if delta_batch_id else []),
        *([] if data_tests else ["--no-data-tests"]),
    ]
    seen = 0
    with log_path.open("w" if phase == "history" else "a", encoding="utf-8") as log:
        proc = subprocess.Popen(
            cmd,
            cwd=project_root(),
            env=_child_env(store),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        while True:
            code = proc.poll()
            lines = events_path.read_text(encoding="utf-8").splitlines()
            for line in lines[seen:]:
                event = json.loads(line)
                if event["event"] == "start":
                    status.update(f"{label}: {event['step']} …")
                else:
                    seconds = event.get("seconds")
                    took = f"{seconds:.1f} s" if isinstance(seconds, int | float) else "ready"
                    console.print(f"  {label}: {event['step']} [dim]{took}[/dim]")
            seen = len(lines)
            if code is not None:
                break
            time.sleep(0.5)
    if code != 0 or not result_path.is_file():
        tail = "\n".join(log_path.read_text(encoding="utf-8", errors="replace").splitlines()[-40:])
        raise PoisonwatchError(
            f"the benchmark worker for {label} ({phase}) exited {code}; last lines of "
            f"{log_path}:\n{tail}"
        )
    return json.loads(result_path.read_text(encoding="utf-8"))


def _serve(
    size_dir: Path, work: Path, attempts: int, label: str, data_tests: bool
) -> dict[str, Any]:
    """The serve phase on the size's store; its figures, or why it has none (`serve_error`)."""
    try:
        serving = serve_phase(
            size_dir / "store",
            size_dir / "serve-delta",
            size_dir / "serve-landing",
            work / f"serve-{attempts}.log",
            _child_env(size_dir / "store"),
            data_tests,
            lambda step, s: console.print(f"  {label}: {step} [dim]{_fmt(s, '.2f')} s[/dim]"),
        )
    except PoisonwatchError as exc:
        # The phases' figures stand; the entry says why it has no serve figures.
        console.print(f"  {label}: [red]serve failed[/red]: {exc}", soft_wrap=True)
        serving = {"serve_error": " ".join(str(exc).split())[:2000]}
    return serving


def bench_size(
    attempts: int,
    seed: int,
    work: Path,
    keep: bool,
    status: Any,
    machine: dict[str, Any],
    data_tests: bool = True,
    increment: int | None = None,
    serve: bool = True,
) -> dict[str, Any]:
    """Measure one size: generate, split, run the child; returns the results entry. With
    `increment`, the delta holds about that many attempts instead of 1 % of the size; without
    `serve`, no serve phase (the entry's `serve_skipped`)."""
    from poisonwatch.generate import generate

    label = f"{attempts:,} attempts"
    size_dir = work / str(attempts)
    shutil.rmtree(size_dir, ignore_errors=True)
    landing, delta = size_dir / "landing", size_dir / "delta"
    delta_share = DELTA_SHARE if increment is None else increment / attempts
    # History, the delta, and as much again, newer, for the server's increment (serve phase).
    generated = round(attempts * (1 + 2 * delta_share))
    status.update(f"{label}: generate {generated:,} attempts …")
    started = time.monotonic()
    generate(landing, seed=seed, attempts=generated, chunk_records=chunk_records_for(attempts))
    generate_s = round(time.monotonic() - started, 3)
    console.print(f"  {label}: generate [dim]{generate_s:.1f} s[/dim]")
    status.update(f"{label}: split off the delta …")
    # split_delta takes share / (1 + share) of what is there: the newest N × share first, and
    # another dataset's newest file only when that leaves the delta its own (as without it).
    served = split_delta(
        landing,
        size_dir / "serve-delta",
        delta_share / (1 + delta_share),
        min_files=MIN_FILES_FOR_DELTA + 1,
    )
    split = split_delta(landing, delta, delta_share)
    console.print(
        f"  {label}: {split.attempts_loaded:,} attempts to load, "
        f"{split.incremental_attempts:,} in the delta (late file: {split.late_file})"
    )
    log_path = work / f"bench-{attempts}.log"
    phases = []
    for phase in PHASES:
        batch = phases[-1].get("delta_batch_id") if phases else None
        phases.append(
            _run_child(size_dir, split, log_path, status, label, data_tests, phase, batch)
        )
    child = merge_phases(phases)
    serving: dict[str, Any] = {"serve_skipped": True}
    if serve:
        status.update(f"{label}: serve …")
        serving = _serve(size_dir, work, attempts, label, data_tests)
    entry: dict[str, Any] = {
        "attempts": attempts,
        "attempts_generated": split.attempts_total,
        "attempts_loaded": split.attempts_loaded,
        "incremental_attempts": split.incremental_attempts,
        "increment_requested": increment,
        "seed": seed,
        "chunk_records": chunk_records_for(attempts),
        "generate_s": generate_s,
        "data_tests": data_tests,
        "build_args": child["build_args"],
        "build_reason": child["build_reason"],
        "build_spark_free": child["build_spark_free"],
        "incremental_build_process": INCREMENTAL_BUILD_PROCESS,
        "spark_start_s": child["spark_start_s"],
        **{f"{s}_s": child[f"{s}_s"] for s in STEPS},
        "peak_rss_mb": child["peak_rss_mb"],
        "peak_rss_mb_after": child["peak_rss_mb_after"],
        "python_max_rss_mb": child["python_max_rss_mb"],
        "floor_messages": child["floor_messages"],
        "floor_sequence_messages": child["floor_sequence_messages"],
        "floor_ingest_attempts": child["floor_ingest_attempts"],
        **{k: child[k] for k in REWRITE_KEYS},
        "slowest_nodes": child["slowest_nodes"],
        "planned_actions": child["planned_actions"],
        "applied_actions": child["applied_actions"],
        "delta": {
            d: {"files": split.moved[d], "records": split.moved_records[d]} for d in split.moved
        },
        "late_file": split.late_file,
        **serving,
        "serve_attempts_landed": served.incremental_attempts,
        "measured_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
        "machine": machine,
        "spark_conf": {**child["spark_conf"], "default_parallelism": child["default_parallelism"]},
        "log": str(log_path),
    }
    _derive(entry)
    if not keep:
        shutil.rmtree(size_dir, ignore_errors=True)
    return entry


def _fmt(value: Any, spec: str = ".1f") -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return f"{value:,}"
    return format(value, spec)


TABLE_COLUMNS = (
    "attempts",
    "floor s",
    "ingest s",
    "full build s",
    "full/floor",
    "incr. build s",
    "incr/full",
    "plan+apply s",
    "peak RSS MiB",
)


def is_warm_increment(entry: dict[str, Any]) -> bool:
    """The entry's incremental build ran in the full build's process (rows before phases)."""
    return entry.get("incremental_build_process", "warm") == "warm"


def _warm_mark(entry: dict[str, Any]) -> str:
    return WARM_MARK if entry.get("incremental_build_s") and is_warm_increment(entry) else ""


WARM_NOTE = (
    f"{WARM_MARK} incremental build timed in the full build's process (a warm driver), as the "
    "bench did before 2026-11-29; the others in a fresh driver, as `poisonwatch build` runs "
    "after `poisonwatch ingest`."
)


def table_rows(entries: Sequence[dict[str, Any]]) -> list[list[str]]:
    rows = []
    for e in entries:
        steps = [e[k] for k in ("plan_s", "apply_s") if e.get(k) is not None]
        plan_apply = sum(steps) if steps else None
        # A models-only row (`--no-data-tests`) says so: its builds did less work.
        models_only = " (no data tests)" if e.get("data_tests") is False else ""
        rows.append(
            [
                _fmt(e.get("attempts")) + models_only,
                _fmt(e.get("floor_s"), ".2f"),
                _fmt(e.get("ingest_s")),
                _fmt(e.get("full_build_s")),
                _fmt(e.get("full_over_floor"), ".2f"),
                _fmt(e.get("incremental_build_s")) + _warm_mark(e),
                _fmt(e.get("incremental_over_full"), ".3f"),
                _fmt(plan_apply),
                _fmt(e.get("peak_rss_mb"), ".0f"),
            ]
        )
    return rows


FLOOR_COLUMNS = (
    "attempts",
    "seq. floor s",
    "full/seq",
    "ingest floor s",
    "ingest/floor",
    "no-data build s",
)


def floor_rows(entries: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The second table: both plain-Spark floors, their ratios, and the no-data build."""
    rows = []
    for e in entries:
        models_only = " (no data tests)" if e.get("data_tests") is False else ""
        rows.append(
            [
                _fmt(e.get("attempts")) + models_only,
                _fmt(e.get("floor_sequence_s"), ".2f"),
                _fmt(e.get("full_over_floor_sequence"), ".2f"),
                _fmt(e.get("floor_ingest_s"), ".2f"),
                _fmt(e.get("ingest_over_floor_ingest"), ".2f"),
                _fmt(e.get("no_data_build_s"), ".2f"),
            ]
        )
    return rows


REWRITE_COLUMNS = (
    "attempts",
    "new",
    "their messages'",
    "rewritten",
    "share",
    "rewritten/theirs",
)


def rewrite_rows(entries: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The third table: attempts the +1 % build rewrote in the attempts table, against the
    attempts of the messages the new batch touched (what a per-message rewrite would write)."""
    rows = []
    for e in entries:
        if not e.get("incremental_rewritten_attempts"):
            continue  # a row from a bench that did not record these figures
        share = e.get("incremental_rewritten_share")
        models_only = " (no data tests)" if e.get("data_tests") is False else ""
        rows.append(
            [
                _fmt(e.get("attempts")) + models_only,
                _fmt(e.get("incremental_new_attempts")),
                _fmt(e.get("incremental_touched_attempts")),
                _fmt(e.get("incremental_rewritten_attempts")),
                "–" if share is None else f"{share:.1%}",
                _fmt(e.get("incremental_rewrite_amplification"), ".1f"),
            ]
        )
    return rows


def slowest_rows(entry: dict[str, Any], limit: int = 10) -> list[list[str]]:
    """[step, node, seconds] for the slowest nodes of each dbt step of one entry."""
    rows = []
    for step_name, nodes in (entry.get("slowest_nodes") or {}).items():
        for node, seconds in nodes[:limit]:
            rows.append([step_name, str(node), _fmt(float(seconds), ".1f")])
    return rows


def describe_machine(entries: Sequence[dict[str, Any]]) -> str:
    """One line: when and where the figures were taken."""
    if not entries:
        return "no results yet"
    dates = sorted({str(e["measured_at"])[:10] for e in entries if e.get("measured_at")})
    latest = max(entries, key=lambda e: (bool(e.get("machine")), str(e.get("measured_at", ""))))
    m = latest.get("machine") or {}
    spark = latest.get("spark_conf") or {}
    return (
        f"poisonwatch bench, measured {', '.join(dates)} on {m.get('cores')} cores, "
        f"{m.get('memory_gib')} GiB, {m.get('platform')}, {m.get('java')}, "
        f"pyspark {m.get('pyspark')}, dbt-core {m.get('dbt_core')} "
        f"(driver memory {spark.get('spark.driver.memory')}, "
        f"{spark.get('spark.sql.shuffle.partitions')} shuffle partitions)"
    )


def _markdown_rows(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A right-aligned Markdown table: header, rule, rows."""
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---:" for _ in columns) + "|"]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def increment_line(entries: Sequence[dict[str, Any]]) -> str | None:
    """What the deltas held, and each size's incremental build against the smallest size's
    (the cost of an increment must not depend on history); none for one size."""
    timed = [e for e in entries if e.get("incremental_build_s")]
    # Like with like: fresh-driver rows when there are two, else the warm ones.
    fresh = [e for e in timed if not is_warm_increment(e)]
    timed = fresh if len(fresh) >= 2 else [e for e in timed if is_warm_increment(e)]
    if len(timed) < 2:
        return None
    requested = {e.get("increment_requested") for e in timed}
    held = (
        f"about {_fmt(requested.pop())} new attempts at every size (`--increment`)"
        if len(requested) == 1 and None not in requested
        else "1 % of each size"
    )
    base = timed[0]
    ratios = ", ".join(
        f"{_fmt(e['attempts'])}: {e['incremental_build_s'] / base['incremental_build_s']:.2f}×"
        for e in timed[1:]
    )
    driver = "a warm driver" if is_warm_increment(base) else "a fresh driver"
    return (
        f"The deltas held {held}. Incremental build ({driver}) against the "
        f"{_fmt(base['attempts'])} attempts' ({base['incremental_build_s']:.1f} s): {ratios}."
    )


def markdown_table(entries: Sequence[dict[str, Any]]) -> str:
    lines = [describe_machine(entries), ""]
    lines += _markdown_rows(TABLE_COLUMNS, table_rows(entries))
    if any(_warm_mark(e) for e in entries):
        lines += ["", WARM_NOTE]
    increments = increment_line(entries)
    if increments:
        lines += ["", increments]
    lines += ["", *_markdown_rows(FLOOR_COLUMNS, floor_rows(entries))]
    serves = serve_rows(list(entries))
    if serves:
        lines += ["", "`poisonwatch serve` on the same store, after the phases above:", ""]
        lines += _markdown_rows(SERVE_COLUMNS, serves)
    rewrites = rewrite_rows(entries)
    if rewrites:
        lines += ["", "Attempts the +1 % build rewrote in `int_receive_attempts_sequenced`:", ""]
        lines += _markdown_rows(REWRITE_COLUMNS, rewrites)
    for entry in entries:
        rows = slowest_rows(entry)
        if rows:
            lines += ["", f"Slowest dbt nodes at {_fmt(entry.get('attempts'))} attempts:", ""]
            lines += ["| step | node | s |", "|---|---|---:|"]
            lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _rich_table(
    title: str, columns: Sequence[str], rows: Sequence[Sequence[str]], caption: str | None = None
) -> Table:
    """A rich table of right-aligned, unwrapped columns."""
    table = Table(title=title, caption=caption)
    for col in columns:
        table.add_column(col, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*row)
    return table


def print_table(entries: Sequence[dict[str, Any]]) -> None:
    # Not a terminal (a log, CI): wide enough that no header is cut.
    out = console if console.is_terminal else Console(width=140)
    caption = describe_machine(entries)
    if any(_warm_mark(e) for e in entries):
        caption += "\n" + WARM_NOTE
    out.print(_rich_table("poisonwatch bench", TABLE_COLUMNS, table_rows(entries), caption))
    floors = floor_rows(entries)
    out.print(_rich_table("floors (plain Spark) and the no-data build", FLOOR_COLUMNS, floors))
    serves = serve_rows(list(entries))
    if serves:
        out.print(_rich_table("poisonwatch serve on the same store", SERVE_COLUMNS, serves))
    rewrites = rewrite_rows(entries)
    if rewrites:
        out.print(_rich_table("attempts the +1 % build rewrote", REWRITE_COLUMNS, rewrites))


def print_slowest(entry: dict[str, Any]) -> None:
    """The ten slowest dbt nodes of each build step of one size (fits 80 columns)."""
    table = Table(title=f"slowest dbt nodes, {_fmt(entry.get('attempts'))} attempts")
    table.add_column("step", no_wrap=True)
    table.add_column("node", overflow="fold", max_width=48)
    table.add_column("s", justify="right", no_wrap=True)
    for row in slowest_rows(entry):
        table.add_row(*row)
    console.print(table)


def default_out(increment: int | None = None) -> Path:
    """bench/results.json; with a fixed increment, a file of its own (`results-increment-<N>`):
    its rows answer another question (the same new data on every size) than the +1 % rows."""
    name = "results.json" if increment is None else f"results-increment-{increment}.json"
    return project_root() / "bench" / name


def run_bench(
    sizes: Sequence[int] = DEFAULT_SIZES,
    seed: int = 42,
    work: Path | None = None,
    out: Path | None = None,
    keep: bool = False,
    data_tests: bool = True,
    increment: int | None = None,
    serve: bool = True,
) -> list[dict[str, Any]]:
    """Benchmark each size in fresh child processes (PHASES); merge into `out` and print the table.

    `increment`: the delta of every size holds about that many attempts (the same new data on
    a small and a large history) instead of 1 % of the size; smaller than every size.

    `data_tests=False` times models and seeds only (dbt's data tests excluded from both builds);
    the entry records it and the table marks the row. `serve=False` leaves out the serve phase.

    Returns every entry of the results file after the merge. Each size is written as soon as it
    is timed, so a failure at a large size keeps the smaller ones.
    """
    sizes = sorted(set(sizes))
    if not sizes or min(sizes) < 1:
        raise PoisonwatchError("--attempts takes positive sizes")
    if increment is not None and not 0 < increment < min(sizes):
        raise PoisonwatchError(
            f"--increment must be positive and smaller than every size, got {increment:,}"
        )
    work = (work or home() / "bench").expanduser().resolve()
    out = (out or default_out(increment)).expanduser().resolve()
    work.mkdir(parents=True, exist_ok=True)
    machine = machine_facts()
    entries = read_results(out)
    with console.status("starting …") as status:
        for attempts in sizes:
            console.rule(f"[bold]bench: {attempts:,} attempts (seed {seed})")
            entry = bench_size(
                attempts,
                seed,
                work,
                keep,
                status,
                machine,
                data_tests,
                increment=increment,
                serve=serve,
            )
            entries = merge_results(entries, [entry])
            write_results(out, entries)
            out.with_suffix(".md").write_text(markdown_table(entries), encoding="utf-8")
            print_slowest(entry)
            console.print(
                f"  {attempts:,} attempts: full build {entry['full_build_s']:.1f} s = "
                f"{entry['full_over_floor']:.2f} × floor; incremental build "
                f"{entry['incremental_build_s']:.1f} s = {entry['incremental_over_full']:.3f} × "
                f"full; peak driver RSS {entry['peak_rss_mb']:.0f} MiB"
            )
    print_table(entries)
    console.print(f"wrote {out} and {out.with_suffix('.md')}")
    return entries


# ---------------------------------------------------------------------------------------------
# The child's command line
# ---------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m poisonwatch.bench",
        description="The benchmark's worker (run by `poisonwatch bench`, one per size).",
    )
    parser.add_argument("--worker", action="store_true", required=True)
    parser.add_argument("--landing", required=True)
    parser.add_argument("--delta", required=True)
    parser.add_argument("--result", required=True)
    parser.add_argument("--events", default=None)
    parser.add_argument("--attempts-loaded", type=int, default=None)
    parser.add_argument("--incremental-attempts", type=int, default=None)
    parser.add_argument("--no-data-tests", action="store_true")
    parser.add_argument("--phase", choices=tuple(PHASES), default="history")
    parser.add_argument("--delta-batch-id", default=None)
    args = parser.parse_args(argv)
    try:
        run_worker(
            Path(args.landing),
            Path(args.delta),
            Path(args.result),
            Path(args.events) if args.events else None,
            attempts_loaded=args.attempts_loaded,
            incremental_attempts=args.incremental_attempts,
            data_tests=not args.no_data_tests,
            phase=args.phase,
            delta_batch_id=args.delta_batch_id,
        )
    except PoisonwatchError as exc:
        Console(stderr=True).print(f"[bold red]bench worker:[/bold red] {exc}", soft_wrap=True)
        return 2
    return 0
