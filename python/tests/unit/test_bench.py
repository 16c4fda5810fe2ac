"""`poisonwatch bench`, its pure parts: delta split, record counts, merging results, the table it
writes (one real run at a tiny size: integration/test_bench_spark.py)."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from poisonwatch.bench import (
    ATTEMPT_DATASETS,
    PHASES,
    STEPS,
    chunk_records_for,
    count_records,
    increment_line,
    markdown_table,
    merge_phases,
    merge_results,
    part_files,
    run_bench,
    split_delta,
)
from poisonwatch.config import PoisonwatchError
from poisonwatch.generate import generate


@pytest.fixture(autouse=True)
def _own_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing touches the user's store; the benchmark's children get stores of their own."""
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("POISONWATCH_TARGET", "local")
    monkeypatch.setenv("POISONWATCH_DRIVER_MEMORY", "2g")


def test_count_records_of_every_format(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"a":1}\n{"a":2}\n{"a":3}')  # no final newline
    with gzip.open(tmp_path / "b.jsonl.gz", "wt") as fh:
        fh.write('{"a":1}\n{"a":2}\n')
    (tmp_path / "c.csv").write_text('x,y\n1,"two\nlines"\n3,4\n')
    assert count_records(tmp_path / "a.jsonl") == 3
    assert count_records(tmp_path / "b.jsonl.gz") == 2
    assert count_records(tmp_path / "c.csv") == 2


def test_split_moves_about_one_percent_and_late_lines(tmp_path: Path) -> None:
    landing, delta = tmp_path / "landing", tmp_path / "delta"
    summary = generate(landing, seed=42, attempts=20_200, chunk_records=chunk_records_for(20_000))
    before = {d: part_files(landing / d) for d in summary.records}
    split = split_delta(landing, delta)

    total = sum(summary.records[d] for d in ATTEMPT_DATASETS)
    assert split.attempts_total == total
    assert split.attempts_loaded + split.incremental_attempts == total
    assert 0.005 * total < split.incremental_attempts <= 0.015 * total
    for dataset in ATTEMPT_DATASETS:
        moved = sorted(p.name for p in (delta / dataset).iterdir())
        assert moved == split.moved[dataset]
        assert before[dataset][-1].name in moved  # the newest records
        records = sum(count_records(delta / dataset / n) for n in moved)
        assert records == split.moved_records[dataset]
        # Nothing lost or doubled: what stays plus what moved is what was generated.
        kept = sum(count_records(f) for f in part_files(landing / dataset))
        assert kept + records == summary.records[dataset]
    # The late lines: the tail of a file older than files that stay in the initial load.
    assert split.late_file is not None
    late = Path(split.late_file).name
    assert f"late-{late}" in split.moved["ssb_receive_attempts"]
    kept_names = [p.name for p in part_files(landing / "ssb_receive_attempts")]
    assert late in kept_names and any(k > late for k in kept_names)
    # Other datasets give their newest file only when they have at least four.
    for dataset, files in before.items():
        if dataset not in ATTEMPT_DATASETS:
            assert split.moved.get(dataset, []) == ([files[-1].name] if len(files) >= 4 else [])
    assert (landing / "labels.jsonl").is_file()


def test_split_moves_the_share_it_is_given(tmp_path: Path) -> None:
    """`--increment`: the same new data on every size; here 10 % of a 20k workload."""
    landing, delta = tmp_path / "landing", tmp_path / "delta"
    generate(landing, seed=42, attempts=22_000, chunk_records=chunk_records_for(20_000))
    split = split_delta(landing, delta, delta_share=0.10)
    assert split.attempts_loaded + split.incremental_attempts == split.attempts_total
    assert 1_800 <= split.incremental_attempts <= 2_200, split.incremental_attempts
    assert split.late_file is not None
    for share in (0, 1, -0.5, 1.5):
        with pytest.raises(PoisonwatchError, match="share of the attempts"):
            split_delta(landing, tmp_path / f"delta{share}", delta_share=share)


def test_bench_refuses_an_increment_not_smaller_than_every_size(tmp_path: Path) -> None:
    for increment in (0, 1_000, 5_000):
        with pytest.raises(PoisonwatchError, match="--increment"):
            run_bench([1_000, 10_000], work=tmp_path, out=tmp_path / "r.json", increment=increment)
    assert not (tmp_path / "r.json").exists()


def test_increment_line_compares_each_size_with_the_smallest() -> None:
    one_percent = [
        {"attempts": 1_000_000, "incremental_build_s": 80.0},
        {"attempts": 10_000_000, "incremental_build_s": 140.0},
    ]
    assert increment_line(one_percent) == (
        "The deltas held 1 % of each size. Incremental build (a warm driver) against the "
        "1,000,000 attempts' (80.0 s): 10,000,000: 1.75×."
    )
    same = [{**e, "increment_requested": 100_000} for e in one_percent]
    assert "about 100,000 new attempts at every size" in increment_line(same)
    assert increment_line(one_percent[:1]) is None
    # Builds timed in a fresh driver are compared with each other, not with warm ones.
    fresh = [
        {"attempts": 100_000, "incremental_build_s": 50.0, "incremental_build_process": "fresh"},
        {"attempts": 1_000_000, "incremental_build_s": 90.0, "incremental_build_process": "fresh"},
    ]
    assert increment_line([*fresh, one_percent[1]]) == (
        "The deltas held 1 % of each size. Incremental build (a fresh driver) against the "
        "100,000 attempts' (50.0 s): 1,000,000: 1.80×."
    )
    assert increment_line([fresh[0], *one_percent]).startswith(
        "The deltas held 1 % of each size. Incremental build (a warm driver) against the 1,000,000"
    )


def test_markdown_marks_increments_timed_in_the_full_builds_process() -> None:
    base = {"full_build_s": 200.0, "incremental_over_full": 0.4}
    warm = {**base, "attempts": 1_000_000, "incremental_build_s": 80.0}
    fresh = {**warm, "attempts": 100_000, "incremental_build_process": "fresh"}
    markdown = markdown_table([fresh, warm])
    assert "| 100,000 | – | – | 200.0 | – | 80.0 | 0.400 |" in markdown
    assert "| 1,000,000 | – | – | 200.0 | – | 80.0† | 0.400 |" in markdown
    assert "† incremental build timed in the full build's process" in markdown
    assert "†" not in markdown_table([fresh])


def test_phases_merge_into_one_entry() -> None:
    history = {
        "ingest_s": 1.0,
        "full_build_s": 9.0,
        "peak_rss_mb": 900.0,
        "peak_rss_mb_after": {"ingest": 800.0, "full_build": 900.0},
        "slowest_nodes": {"full_build": [["model a", 3.0]]},
        "build_spark_free": [],
        "spark_start_s": {"history": 4.0},
        "driver_pids": [11],
        "spark_conf": {"spark.master": "local[*]", "x": 1},
    }
    delta = {
        "incremental_ingest_s": 0.5,
        "peak_rss_mb": 500.0,
        "driver_pids": [12],
        "spark_start_s": {"delta": 3.0},
        "delta_batch_id": "b1",
    }
    increment = {
        "incremental_build_s": 5.0,
        "peak_rss_mb": 700.0,
        "peak_rss_mb_after": {"incremental_build": 700.0},
        "slowest_nodes": {"incremental_build": [], "no_data_build": []},
        "build_spark_free": ["no_data_build"],
        "spark_start_s": {"increment": 3.5},
        "driver_pids": [13],
        "spark_conf": {"spark.master": "local[*]"},
    }
    merged = merge_phases([history, delta, increment])
    assert merged["peak_rss_mb"] == 900.0
    assert merged["peak_rss_mb_after"] == {
        "ingest": 800.0,
        "full_build": 900.0,
        "incremental_build": 700.0,
    }
    assert set(merged["slowest_nodes"]) == {"full_build", "incremental_build", "no_data_build"}
    assert merged["spark_start_s"] == {"history": 4.0, "delta": 3.0, "increment": 3.5}
    assert merged["driver_pids"] == [11, 12, 13]
    assert merged["build_spark_free"] == ["no_data_build"]
    assert merged["spark_conf"] == {"spark.master": "local[*]"}  # the last phase's, whole
    assert (merged["ingest_s"], merged["incremental_build_s"]) == (1.0, 5.0)
    assert [s for steps in PHASES.values() for s in steps] == list(STEPS)


def test_merge_replaces_the_same_size_and_keeps_the_others() -> None:
    old = [{"attempts": 1_000_000, "x": 1}, {"attempts": 100_000, "x": 1}]
    merged = merge_results(old, [{"attempts": 100_000, "x": 2}, {"attempts": 5_000, "x": 3}])
    assert [(e["attempts"], e["x"]) for e in merged] == [(5_000, 3), (100_000, 2), (1_000_000, 1)]


def test_rewrite_sql_takes_only_an_ingest_batch_id() -> None:
    from poisonwatch.bench.run import rewrite_sql
    from poisonwatch.config import PoisonwatchError

    assert "batch_id = 'b20261125T020640Z_e1f8cdff'" in rewrite_sql("b20261125T020640Z_e1f8cdff")
    for hostile in ("b20261125T020640Z_e1f8cdff' or '1'='1", "';--", ""):
        with pytest.raises(PoisonwatchError, match="not an ingest batch id"):
            rewrite_sql(hostile)


def test_ratios_are_the_figures_divided_as_the_table_says() -> None:
    """The derived ratios on figures whose quotients are worked out by hand (the tiny bench run
    only checks that they are written)."""
    from poisonwatch.bench.run import _derive

    entry = {
        "full_build_s": 30.0,
        "floor_s": 4.0,
        "floor_sequence_s": 8.0,
        "ingest_s": 5.0,
        "floor_ingest_s": 2.0,
        "incremental_build_s": 6.0,
        "incremental_rewritten_attempts": 300,
        "incremental_sequenced_attempts": 3000,
        "incremental_touched_attempts": 120,
    }
    _derive(entry)
    assert entry["full_over_floor"] == 7.5
    assert entry["full_over_floor_sequence"] == 3.75
    assert entry["ingest_over_floor_ingest"] == 2.5
    assert entry["incremental_over_full"] == 0.2
    assert entry["incremental_rewritten_share"] == 0.1
    assert entry["incremental_rewrite_amplification"] == 2.5
    # No rewrite figures (no increment ran): no share or amplification is made up.
    bare = {k: v for k, v in entry.items() if not k.startswith("incremental_r")}
    bare.pop("incremental_touched_attempts")
    bare.pop("incremental_sequenced_attempts")
    _derive(bare)
    assert "incremental_rewritten_share" not in bare
    assert "incremental_rewrite_amplification" not in bare


def test_the_servers_increment_lands_whole(tmp_path: Path) -> None:
    """The serve phase's increment appears in the landing folder in one rename: every file,
    the same bytes, nothing left beside it."""
    from poisonwatch.bench.serve import land_increment

    source = tmp_path / "serve-delta"
    for name, text in {"ssb_receive_attempts/part-00001.jsonl": "{}\n", "jms/x.csv": "a\n"}.items():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        (source / name).write_text(text)
    landing = tmp_path / "serve-landing"
    landing.mkdir()
    newest = land_increment(source, landing)
    landed = {p.relative_to(landing).as_posix(): p.read_text() for p in landing.rglob("*.*")}
    assert landed == {"ssb_receive_attempts/part-00001.jsonl": "{}\n", "jms/x.csv": "a\n"}
    assert newest == max(p.stat().st_mtime_ns for p in landing.rglob("*.*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["serve-delta", "serve-landing"]


def test_the_serve_increment_and_the_delta_each_get_a_share(tmp_path: Path) -> None:
    """bench_size's two splits: the server's increment first (the newest), then the delta,
    about N × share each; another dataset gives the increment a file only when the delta
    still gets one of its own."""
    landing = tmp_path / "landing"
    generate(landing, seed=42, attempts=20_400, chunk_records=chunk_records_for(20_000))
    before = {d.name: part_files(d) for d in landing.iterdir() if d.is_dir()}
    served = split_delta(landing, tmp_path / "serve", 0.01 / 1.01, min_files=5)
    split = split_delta(landing, tmp_path / "delta", 0.01)
    for part in (served, split):
        assert 150 <= part.incremental_attempts <= 250, part.incremental_attempts
    assert served.attempts_total == split.attempts_total + served.incremental_attempts
    for dataset, files in before.items():
        if dataset in ATTEMPT_DATASETS or not files:
            continue
        assert served.moved.get(dataset, []) == ([files[-1].name] if len(files) >= 5 else [])
        assert split.moved.get(dataset, []) == (
            [files[-2].name] if len(files) >= 5 else [files[-1].name] if len(files) == 4 else []
        )


def test_markdown_has_one_serve_table() -> None:
    entry = {
        "attempts": 100_000,
        "serve_attempts": 1_000,
        "serve_start_s": 20.0,
        "serve_increment_s": 30.0,
        "serve_increment_build_s": 25.0,
        "serve_webhook_s": None,
        "serve_idle_cycle_s": 0.01,
        "serve_sql_s": 0.8,
        "serve_rss_mb_first": 2000.0,
        "serve_rss_mb_last": 2100.0,
        "serve_cycles": 8,
    }
    markdown = markdown_table([entry, {"attempts": 10_000, "serve_error": "it failed"}])
    assert markdown.count("`poisonwatch serve` on the same store") == 1
    row = "| 100,000 | 1,000 | 20.0 | 30.0 | 25.0 | – | 0.01 | 0.80 | 2000 | 2100 | 8 |"
    assert row in markdown
    assert "| 10,000 | " not in markdown.split("`poisonwatch serve`")[1]
