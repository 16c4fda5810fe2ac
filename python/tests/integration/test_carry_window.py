"""The state an incremental gaps-and-islands model carries over its cutoff is read from the last
partitions that hold every needed key, not from all of history
(macros/incremental/carry_window_filter.sql). Real dbt and Spark on the store these tests share
(conftest.py): a table with five hourly partitions before the cutoff, and the clause the macro
returns for keys found in the last partition, in the last four, in none (a new key), and with no
cutoff. The full-refresh = incremental comparison (test_incremental.py) checks the models using
it."""

from __future__ import annotations

from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from support.child_dbt import compile_inline
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import connect

ROWS = {
    "2026-01-01 00:00:00": ["A", "B", "x';--"],
    "2026-01-01 01:00:00": ["A"],
    "2026-01-01 02:00:00": ["A"],
    "2026-01-01 03:00:00": ["A", "B"],
    "2026-01-01 04:00:00": ["A"],
    "2026-01-01 05:00:00": ["B"],  # from the cutoff on: never a window's start
}

def clause(cutoff, keys):
    needed = " union all ".join(f"select {sql_string(k)} as k" for k in keys)
    cutoff_sql = "none" if cutoff is None else repr(cutoff)
    inline = (
        "{{ carry_window_filter(api.Relation.create(schema='cw', identifier='t'), 'p', "
        f"{cutoff_sql}, ['k'], {needed!r}) }}}}"
    )
    return " ".join(compile_inline(inline).split())

with connect("local") as e:
    e.execute("create database if not exists cw")
    e.execute("create table cw.t (k string, p string) using parquet partitioned by (p)")
    for p, keys in ROWS.items():
        values = ", ".join(f"({sql_string(k)})" for k in keys)
        e.execute(f"insert into cw.t partition (p = {sql_string(p)}) values {values}")
cutoff = "2026-01-01 05:00:00"
out = {
    "last": clause(cutoff, ["A"]),
    "last_four": clause(cutoff, ["A", "B"]),
    "older": clause(cutoff, ["A", "x';--"]),
    "new_key": clause(cutoff, ["A", "NEW"]),
    "no_cutoff": clause(None, ["A"]),
}
print("@@" + json.dumps(out))
"""

EVERYTHING = "where p < '2026-01-01 05:00:00'"


@pytest.fixture(scope="module")
def clauses(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_keys_in_the_last_partition_read_only_that_partition(clauses: dict[str, Any]) -> None:
    assert clauses["last"] == f"{EVERYTHING} and p >= '2026-01-01 04:00:00'"


def test_a_key_further_back_widens_the_window_until_it_is_in(clauses: dict[str, Any]) -> None:
    # B's last row before the cutoff is at 03:00; one partition back misses it, four find it.
    assert clauses["last_four"] == f"{EVERYTHING} and p >= '2026-01-01 01:00:00'"


def test_keys_only_in_old_or_no_partitions_read_everything_before_the_cutoff(
    clauses: dict[str, Any],
) -> None:
    assert clauses["older"] == EVERYTHING  # only in the first partition (and a hostile key)
    assert clauses["new_key"] == EVERYTHING  # no row before the cutoff at all
    assert clauses["no_cutoff"] == "where false"  # nothing new: read nothing
