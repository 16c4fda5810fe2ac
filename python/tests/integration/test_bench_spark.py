"""`poisonwatch bench` for real at a tiny size (Spark and dbt, a few minutes): it runs and writes
every field of its phases (the pure parts — delta split, record counts, merging results, the
serve table — are in unit/test_bench.py). Its serve phase, a `poisonwatch serve` on the same
store, is left out here (`--no-serve`): the server's cycles, status figures and webhook are
e2e/test_serve.py's, and `poisonwatch bench` runs the phase. Speed is never asserted: the
benchmark only reports figures."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from poisonwatch.bench import ATTEMPT_DATASETS, PHASES, REQUIRED_KEYS, STEPS, run_bench
from poisonwatch.bench.serve import SERVE_KEYS

SIZE = 3000


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing touches the user's store; the benchmark's children get stores of their own."""
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("POISONWATCH_TARGET", "local")
    monkeypatch.setenv("POISONWATCH_DRIVER_MEMORY", "2g")


def raw_rows_by_batch(warehouse: Path) -> Counter[str]:
    """Rows of the raw attempt tables per ingest batch, from the row counts of their Parquet
    files (`_batch_id=<batch>` folders), read without Spark and without the bench's code."""
    rows: Counter[str] = Counter()
    for dataset in ATTEMPT_DATASETS:
        for part in (warehouse / "raw.db" / dataset).glob("_batch_id=*/*.parquet"):
            batch = part.parent.name.removeprefix("_batch_id=")
            rows[batch] += pq.ParquetFile(part).metadata.num_rows
    return rows


@pytest.mark.slow
def test_bench_end_to_end_at_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "bench" / "results.json"
    # An entry of another size is already there: the run keeps it.
    out.parent.mkdir()
    out.write_text(json.dumps([{"attempts": 10_000_000, "full_build_s": 1.0}]))

    # Models and seeds only: the data tests cost the same fixed seconds at any size and run in
    # the test script's own `dbt build`; this test checks the benchmark's plumbing and figures.
    # Kept (`--keep`), so that the store's own files can be counted against the figures.
    started = time.monotonic()
    entries = run_bench(
        [SIZE], seed=42, work=tmp_path / "work", out=out, data_tests=False, keep=True, serve=False
    )
    wall_s = time.monotonic() - started

    saved = json.loads(out.read_text())
    assert saved == entries
    assert [e["attempts"] for e in saved] == [SIZE, 10_000_000]
    entry = saved[0]
    missing = [k for k in REQUIRED_KEYS if k not in entry]
    assert not missing, missing
    for step in STEPS:
        assert entry[f"{step}_s"] > 0, step
    assert entry["generate_s"] > 0
    assert entry["data_tests"] is False
    # The production command: the whole selector with --full-refresh, then only what is
    # downstream of the delta's sources, then nothing at all (nothing new landed).
    args = entry["build_args"]
    assert args["full_build"][:3] == ["build", "--selector", "production"]
    assert "--full-refresh" in args["full_build"]
    assert args["full_build"][-2:] == ["--exclude-resource-type", "test"]
    assert args["incremental_build"][:2] == ["build", "--select"]
    for source in ("service_broker.ssb_receive_attempts", "jms.jms_receive_attempts"):
        assert f"source:{source}+" in args["incremental_build"]
    # ... without unit tests, data tests (this run) and the on-demand backtests.
    assert args["incremental_build"][-5:] == [
        "--exclude-resource-type",
        "unit_test",
        "test",
        "--exclude",
        "tag:on_demand",
    ]
    assert args["no_data_build"] == []
    # ... decided from the ledgers' Parquet files alone, which agreed with what Spark read.
    assert entry["build_spark_free"] == ["no_data_build"]
    assert "nothing new" in entry["build_reason"]["no_data_build"]
    # The ten slowest nodes of each dbt step, slowest first; none when dbt did not run.
    slowest = entry["slowest_nodes"]
    assert len(slowest["full_build"]) == 10 and slowest["incremental_build"]
    assert slowest["no_data_build"] == []
    for nodes in slowest.values():
        seconds = [s for _, s in nodes]
        assert seconds == sorted(seconds, reverse=True) and all(s >= 0 for s in seconds)
        assert all(n.split(" ")[0] in ("model", "seed", "test", "operation") for n, _ in nodes)
    # Both floors read what the pipeline read: every message, every landed attempt.
    assert entry["floor_sequence_messages"] == entry["floor_messages"] > 0
    assert entry["floor_ingest_attempts"] == entry["attempts_loaded"]
    assert 0 < entry["incremental_attempts"] <= 0.03 * SIZE
    assert entry["attempts_loaded"] + entry["incremental_attempts"] == entry["attempts_generated"]
    # The ratios are written (their arithmetic: unit/test_bench.py, on figures worked by hand).
    ratios = (
        "full_over_floor",
        "full_over_floor_sequence",
        "ingest_over_floor_ingest",
        "incremental_over_full",
        "incremental_rewritten_share",
        "incremental_rewrite_amplification",
    )
    assert all(entry[name] > 0 for name in ratios), {name: entry[name] for name in ratios}
    # What the +1 % build rewrote in the attempts table: at least every attempt of the
    # messages the delta touched (all attempts of a message live in one partition, so a
    # rewrite takes all of them), at most the whole table.
    new, touched = entry["incremental_new_attempts"], entry["incremental_touched_attempts"]
    rewritten, sequenced = (
        entry["incremental_rewritten_attempts"],
        entry["incremental_sequenced_attempts"],
    )
    assert new == entry["incremental_attempts"]
    assert sequenced == entry["attempts_generated"]
    assert 0 < new <= touched <= rewritten <= sequenced
    assert entry["peak_rss_mb"] > 100
    assert set(entry["peak_rss_mb_after"]) == set(STEPS)
    # Each phase in a driver of its own: the delta's ingest and the incremental build start
    # fresh, as `poisonwatch ingest` and `poisonwatch build` do.
    assert entry["incremental_build_process"] == "fresh"
    assert set(entry["spark_start_s"]) == set(PHASES)
    assert all(s > 0 for s in entry["spark_start_s"].values())
    assert entry["machine"]["cores"] and entry["machine"]["java"]
    assert entry["spark_conf"]["spark.driver.memory"] == "2g"
    # Counted here, not by the bench: the raw tables hold every generated attempt, the delta's
    # batch (the newest) the increment's, the earlier ones the history's.
    by_batch = raw_rows_by_batch(tmp_path / "work" / str(SIZE) / "store" / "warehouse")
    # The history's ingest and the delta's, in that order; no serve phase, no server's increment.
    history, delta_batch = sorted(by_batch)
    assert by_batch[history] == entry["attempts_loaded"], by_batch
    assert by_batch[delta_batch] == entry["incremental_attempts"], by_batch
    assert entry["serve_skipped"] is True
    assert not [k for k in SERVE_KEYS if k in entry], entry
    assert not (tmp_path / "work" / f"serve-{SIZE}.log").exists()
    # Timed here: every step ran inside run_bench, one after another, so their seconds add up
    # to less than its wall time; a dbt node's seconds fit inside its build's.
    assert sum(entry[f"{step}_s"] for step in STEPS) + entry["generate_s"] < wall_s, wall_s
    for name, nodes in slowest.items():
        assert all(seconds <= entry[f"{name}_s"] for _, seconds in nodes), (name, nodes)
    markdown = out.with_suffix(".md").read_text()
    assert "`poisonwatch serve` on the same store" not in markdown, markdown
    assert markdown.startswith("poisonwatch bench, measured ")
    assert f"| {SIZE:,} (no data tests) |" in markdown and "| 10,000,000 |" in markdown
    assert "| seq. floor s | full/seq |" in markdown and f"at {SIZE:,} attempts:" in markdown
    assert f"| {SIZE:,} (no data tests) | {new:,} | {touched:,} | {rewritten:,} |" in markdown
