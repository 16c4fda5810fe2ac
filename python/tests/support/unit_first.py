"""The dbt unit tests (the rules) on an empty store, first in `make test`, so a broken rule
fails the run before the long lanes start: the raw tables are created empty, the unit tests'
parent models are built with `--empty` (their schemas are what the unit tests need), and the
unit tests run, all in one driver JVM. Arguments are passed on to dbt.
The empty tables are Parquet unless POISONWATCH_FILE_FORMAT says otherwise: they only give the
unit tests their columns, and Spark creates and describes a Parquet table without reading a
Delta log."""

from __future__ import annotations

import os
import sys

from poisonwatch.config import PoisonwatchError
from poisonwatch.ingest.loader import ensure_tables
from poisonwatch.warehouse.dbtrun import run_dbt
from poisonwatch.warehouse.engine import connect

# Seeds and the unit tests' parent models, empty; not the data tests (no rows to test).
ARGS = ["build", "--select", "+test_type:unit", "--empty", "--exclude-resource-type", "test"]


def main(extra: list[str]) -> int:
    os.environ.setdefault("POISONWATCH_FILE_FORMAT", "parquet")
    try:
        with connect() as engine:
            ensure_tables(engine)
            run_dbt(
                [*ARGS, *extra],
                label="parents (--empty) and unit tests",
            )
    except PoisonwatchError as err:  # names the failing unit tests; a traceback adds nothing
        print(err, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
