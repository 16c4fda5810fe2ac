"""The bounds incremental models read their new input with. Real dbt and Spark on the store these
tests share (conftest.py).
The partitions an upstream rewrote since a model last read them (macros/utils/
changed_partitions_filter.sql) are found in SQL, with the statement: after the bound
`poisonwatch build` passes (POISONWATCH_CHANGED_SINCE, a literal; anything but a timestamp is
refused), or else after the newest stamp of the model's own rows (a subquery on `this`).
The newest landing batch a model holds (record_batch_watermark.sql: a pending property before
the run writes, a committed one after; recorded_batch_watermark.sql): the condition a model
filters its new batches with reads the pair when both agree, and scans the table's batch_id
when they differ (a run stopped between them), are missing or hold other text.
test_incremental.py checks the models that use them against a full refresh."""

from __future__ import annotations

import re
from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
import os
from support.child_dbt import compile_inline
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import connect

def rel(name):
    return f"api.Relation.create(schema='wm', identifier='{name}')"

def compiled(inline):
    return " ".join(compile_inline(inline).split())

BATCHES = "('b20260101T000000Z_aaaaaaaa'), ('b20260102T000000Z_bbbbbbbb')"
OLDER = "b20260101T000000Z_aaaaaaaa"
with connect("local") as e:
    e.execute("create database if not exists wm")
    for name in ("b_plain", "b_recorded", "b_pending", "b_hostile", "b_empty"):
        e.execute(f"create table wm.{name} (batch_id string) using parquet")
        if name != "b_empty":
            e.execute(f"insert into wm.{name} values {BATCHES}")
    # The recorded batch is deliberately older than the rows' newest: read back, it shows
    # that the condition came from the properties, not from a scan.
    e.execute(
        "alter table wm.b_recorded set tblproperties ('poisonwatch.batch_watermark' = "
        f"'{OLDER}', 'poisonwatch.batch_watermark.pending' = '{OLDER}')"
    )
    e.execute(
        "alter table wm.b_pending set tblproperties ('poisonwatch.batch_watermark' = "
        f"'{OLDER}', 'poisonwatch.batch_watermark.pending' = 'b20260103T000000Z_cccccccc')"
    )
    hostile = sql_string(OLDER + "' or true --")
    e.execute(
        f"alter table wm.b_hostile set tblproperties ('poisonwatch.batch_watermark' = "
        f"{hostile}, 'poisonwatch.batch_watermark.pending' = {hostile})"
    )
    e.execute("create table wm.up (sequenced_at timestamp, p string) using parquet")
    e.execute(
        "insert into wm.up values (timestamp '2026-01-01 00:00:00', 'a'), "
        "(timestamp '2026-01-02 03:04:05.123456', 'b')"
    )


def condition(name):
    return compiled("{{ unprocessed_batches_condition(" + rel(name) + ") }}")

TAKE = "{% do batches_taken(this, 'b20260102T000000Z_bbbbbbbb') %}"
out = {
    "conditions": {
        name: condition(name)
        for name in ("b_plain", "b_recorded", "b_pending", "b_hostile", "b_empty")
    },
    "taken": compiled(
        "{% do batches_taken(" + rel("t") + ", 'b20260102T000000Z_bbbbbbbb') %}"
        "{% do batches_taken(" + rel("t") + ", none) %}"
        "{% do batches_taken(" + rel("t") + ", 'b20260101T000000Z_aaaaaaaa') %}"
        "{{ batches_taken(" + rel("t") + ") }}|{{ batches_taken(" + rel("u") + ") }}"
    ),
    "newest": compiled(
        "{{ newest_batch('select batch_id from wm.b_plain') }}|"
        "{{ newest_batch('select batch_id from wm.b_empty') }}"
    ),
    "pending_nothing_taken": compiled("{{ record_batch_watermark('pending') }}"),
    "pending": compiled(TAKE + "{{ record_batch_watermark('pending') }}"),
    "committed": compiled(TAKE + "{{ record_batch_watermark('committed') }}"),
    "unchanged_on_full_refresh": compiled(
        "{{ changed_partitions_filter(" + rel("up") + ", 'p', 'sequenced_at', false) }}"
    ),
    "set": compiled(
        "{{ set_table_properties(" + rel("t") + ", {'a.b': 'x', 'c': \\"y' or true --\\"}) }}"
    ),
}
# The partitions of wm.up rewritten after the bound `poisonwatch build` passes: its filter run
# for real (only b's stamp is newer), and a value that is not a timestamp refused.
FILTER = "{{ changed_partitions_filter(" + rel("up") + ", 'p', 'sequenced_at', true) }}"
os.environ["POISONWATCH_CHANGED_SINCE"] = "2026-01-01 00:00:00"
try:
    out["since_filter"] = compiled(FILTER)
    with connect("local") as e2:
        out["since_rows"] = sorted(
            row[0] for row in e2.query("select p from wm.up " + out["since_filter"])[1]
        )
    os.environ["POISONWATCH_CHANGED_SINCE"] = "2026-01-01 00:00:00' or true --"
    try:
        compiled("{% if execute %}" + FILTER + "{% endif %}")
        out["since_refused"] = ""
    except AssertionError as exc:
        out["since_refused"] = str(exc)
finally:
    os.environ.pop("POISONWATCH_CHANGED_SINCE", None)
# Without it, the newest stamp of the model's own rows.
out["own_filter"] = compiled(FILTER)
# cache_rows outside run and build returns its query; one holding a `with` is refused, as
# Spark would not reuse it from the cache (a column named like the keyword is no `with`).
out["cache_plain"] = compiled(
    "{{ cache_rows(" + rel("up") + ", 'select with_x from (select 1 as with_x) as w') }}"
)
for name, sql in (
    ("cache_with", "With  a AS (select 1) select * from a"),
    ("cache_nested_with", "select * from (with a as (select 1) select * from a) as b"),
    ("cache_with_columns", "with a (x, y) as (select 1, 2) select * from a"),
    ("cache_with_recursive", "with recursive a as (select 1) select * from a"),
):
    try:
        compiled(
            "{% if execute %}{{ cache_rows(" + rel("up") + ", " + json.dumps(sql) + ") }}"
            "{% endif %}"
        )
        out[name] = ""
    except AssertionError as exc:
        out[name] = str(exc)
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def out(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_the_partitions_changed_after_the_build_s_bound_are_read(out: dict[str, Any]) -> None:
    # a literal, so Delta can skip the files no later run wrote; only b's stamp is newer
    assert (
        "where p in ( select changed.p from wm.up as changed "
        "where changed.sequenced_at > timestamp '2026-01-01 00:00:00' )"
    ) in out["since_filter"], out["since_filter"]
    assert out["since_rows"] == ["b"]
    assert "POISONWATCH_CHANGED_SINCE must be 'yyyy-MM-dd HH:mm:ss'" in out["since_refused"]


def test_without_the_build_s_bound_the_model_s_own_newest_stamp_is(out: dict[str, Any]) -> None:
    assert re.search(
        r"where changed\.sequenced_at > \(select coalesce\(max\(sequenced_at\), "
        r"timestamp '0001-01-01'\) from \S+\)",
        out["own_filter"],
    ), out["own_filter"]
    assert out["unchanged_on_full_refresh"] == ""


def test_the_batch_hooks_statement_quotes_keys_and_values(out: dict[str, Any]) -> None:
    # the statement the batch hooks write: keys and values quoted, in order
    assert out["set"] == (
        "alter table wm.t set tblproperties ('a.b' = 'x', 'c' = 'y\\' or true --')"
    ), out["set"]


NEWEST = "b20260102T000000Z_bbbbbbbb"


def test_the_batch_condition_reads_an_agreeing_pair_and_no_rows(out: dict[str, Any]) -> None:
    # the pair holds an older batch than the rows do: no scan happened
    assert out["conditions"]["b_recorded"] == "batch_id > 'b20260101T000000Z_aaaaaaaa'"


def test_the_batch_condition_scans_without_an_agreeing_pair(out: dict[str, Any]) -> None:
    # a run stopped between the hooks, no properties, or text that is not a batch id
    for name in ("b_pending", "b_plain", "b_hostile"):
        assert out["conditions"][name] == f"batch_id > '{NEWEST}'", (name, out["conditions"])
    assert out["conditions"]["b_empty"] == "true"


def test_batches_taken_keeps_the_newest_per_table(out: dict[str, Any]) -> None:
    assert out["taken"] == f"{NEWEST}|None"


def test_newest_batch_of_a_query(out: dict[str, Any]) -> None:
    assert out["newest"] == f"{NEWEST}|None"


def test_the_batch_hooks_write_pending_before_and_both_after(out: dict[str, Any]) -> None:
    assert out["pending_nothing_taken"] == ""
    assert re.fullmatch(
        rf"alter table \S+ set tblproperties \('poisonwatch\.batch_watermark\.pending' "
        rf"= '{NEWEST}'\)",
        out["pending"],
    ), out["pending"]
    assert re.fullmatch(
        rf"alter table \S+ set tblproperties \('poisonwatch\.batch_watermark\.pending' "
        rf"= '{NEWEST}', 'poisonwatch\.batch_watermark' = '{NEWEST}'\)",
        out["committed"],
    ), out["committed"]


def test_cache_rows_refuses_a_query_spark_would_not_reuse(out: dict[str, Any]) -> None:
    assert out["cache_plain"] == "select with_x from (select 1 as with_x) as w"
    for name in ("cache_with", "cache_nested_with", "cache_with_columns", "cache_with_recursive"):
        assert "the query holds a `with`" in out[name], (name, out[name])
