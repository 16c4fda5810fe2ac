"""`poisonwatch bench`: times ingest, the full and incremental builds and plan/apply against a
floor, at several sizes, each phase of a size in a fresh Spark driver (`run`); writes
`bench/results.json`.

May import `poisonwatch.config`, `poisonwatch.warehouse` and other jobs through their packages
(`poisonwatch.generate`, `poisonwatch.ingest`, `poisonwatch.remediation`).
"""

from poisonwatch.bench.run import (
    ATTEMPT_DATASETS,
    DEFAULT_SIZES,
    PHASES,
    REQUIRED_KEYS,
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

__all__ = [
    "ATTEMPT_DATASETS",
    "DEFAULT_SIZES",
    "PHASES",
    "REQUIRED_KEYS",
    "STEPS",
    "chunk_records_for",
    "count_records",
    "increment_line",
    "markdown_table",
    "merge_phases",
    "merge_results",
    "part_files",
    "run_bench",
    "split_delta",
]
