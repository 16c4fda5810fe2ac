"""Every great-expectations suite reads landing tables through their committed batches only.

`committed_only` rewrites each `{raw}.<landing table>` a suite's SQL names; a suite that named a
table another way would read orphan batches too. integration/test_orphan_batches.py runs the
two suites over the tables it plants defects in; this holds the rest to the same filter.
"""

from __future__ import annotations

import re

import pytest

from poisonwatch.quality.checks import LANDING_TABLES, SuiteDefinition, load_suites
from poisonwatch.warehouse.schemas import LEDGER_TABLE

NAMES = {"raw": "raw", "marts": "poisonwatch", "policy": "poisonwatch_policy"}
SUITES = load_suites()


def _committed(table: str) -> str:
    return (
        f"(select * from raw.{table} where _batch_id in "
        f"(select committed._batch_id from raw.{LEDGER_TABLE} as committed))"
    )


@pytest.mark.parametrize("suite", SUITES, ids=[s.name for s in SUITES])
def test_landing_tables_are_read_through_committed_batches(suite: SuiteDefinition) -> None:
    sql = suite.rendered_sql(NAMES)
    rest = sql
    for table in LANDING_TABLES:
        rest = rest.replace(_committed(table), "")
    named = {t for t in LANDING_TABLES if re.search(rf"\b{t}\b", rest)}
    assert not named, f"{suite.path.name} reads {sorted(named)} outside the committed filter"
    if rest != sql:
        assert f"raw.{LEDGER_TABLE}" in suite.required_tables(NAMES)


def test_every_suite_but_the_ledgers_own_reads_landing_tables() -> None:
    reading = {s.name for s in SUITES if s.rendered_sql(NAMES) != s.sql.replace("{raw}", "raw")}
    assert {s.name for s in SUITES} - reading == {"raw_ingested_files"}
    assert len(SUITES) == 20
