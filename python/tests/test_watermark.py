"""Incremental models record the upstream watermark they have taken in as a table property after
each run (macros/incremental/record_watermark.sql, a post-hook) and read it back before the next
(recorded_watermark.sql), instead of scanning their own rows for the newest value. Real dbt and
Spark on the store these tests share (conftest.py): the statement the hook writes for an
upstream with rows and for an empty one, and what is read back from a table with the property,
without it, and with a value that is not a timestamp (hostile text included).
test_incremental.py checks the models that use them against a full refresh."""

from __future__ import annotations

import re
from typing import Any

import pytest
from child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from child_dbt import compile_inline
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import connect

def rel(name):
    return f"api.Relation.create(schema='wm', identifier='{name}')"

def compiled(inline):
    return " ".join(compile_inline(inline).split())

def recorded(name):
    return compiled("{{ recorded_watermark(" + rel(name) + ", 'sequenced_at') }}")

with connect("local") as e:
    e.execute("create database if not exists wm")
    e.execute("create table wm.up (sequenced_at timestamp, p string) using parquet")
    e.execute(
        "insert into wm.up values (timestamp '2026-01-01 00:00:00', 'a'), "
        "(timestamp '2026-01-02 03:04:05.123456', 'b')"
    )
    e.execute("create table wm.empty (sequenced_at timestamp) using parquet")
    for name in ("plain", "stamped", "hostile"):
        e.execute(f"create table wm.{name} (sequenced_at timestamp) using parquet")
    e.execute(
        "alter table wm.stamped set tblproperties "
        "('poisonwatch.watermark.sequenced_at' = '2026-01-02 03:04:05.123456')"
    )
    e.execute(
        "alter table wm.hostile set tblproperties ('poisonwatch.watermark.sequenced_at' = "
        + sql_string("2026-01-02 03:04:05') or true --") + ")"
    )
out = {
    "hook": compiled("{{ record_watermark(" + rel("up") + ", 'sequenced_at') }}"),
    "hook_empty": compiled("{{ record_watermark(" + rel("empty") + ", 'sequenced_at') }}"),
    "plain": recorded("plain"),
    "stamped": recorded("stamped"),
    "hostile": recorded("hostile"),
}
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def out(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_the_hook_records_the_newest_upstream_value(out: dict[str, Any]) -> None:
    assert re.fullmatch(
        r"alter table \S+ set tblproperties \( 'poisonwatch\.watermark\.sequenced_at' "
        r"= '2026-01-02 03:04:05\.123456' \)",
        out["hook"],
    ), out["hook"]


def test_the_hook_writes_nothing_for_an_empty_upstream(out: dict[str, Any]) -> None:
    assert out["hook_empty"] == ""


def test_a_recorded_timestamp_is_read_back(out: dict[str, Any]) -> None:
    assert out["stamped"] == "2026-01-02 03:04:05.123456"


def test_no_property_or_one_that_is_not_a_timestamp_reads_as_none(out: dict[str, Any]) -> None:
    # the caller then scans its own rows, as before the property existed
    assert out["plain"] == "None"
    assert out["hostile"] == "None"
