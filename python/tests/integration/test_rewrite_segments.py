"""Which partitions an incremental run of a gaps-and-islands model rewrites
(macros/incremental/rewrite_segments.sql): the buckets holding new rows, and the next ones only
while a key's island may go on past them. Real dbt and Spark on the store these tests share
(conftest.py): a table with six hourly partitions of two queues' attempts, and the segments the
macro returns for new attempts placed before and after a reset, in a new bucket, merging, at the
end of history, and past the extension limit; and a stream named by two key columns. The
full-refresh = incremental comparison (test_incremental.py) checks the models using it."""

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

COLUMNS = (
    "queue_key string, attempted_at timestamp, attempt_id string, source_file string, "
    "record_number bigint, attempt_key string, is_whole_transaction_rollback boolean, p string"
)
# (queue, hh:mm, is rollback): queue q resets in most hours, queue r only ever rolls back.
OLD = [
    ("q", "00:10", False), ("q", "01:10", False), ("q", "02:10", True), ("q", "02:30", False),
    ("q", "03:10", True), ("q", "03:20", False), ("q", "04:10", True), ("q", "05:10", True),
    ("r", "02:50", True), ("r", "03:50", True), ("r", "04:50", True), ("r", "05:50", True),
]
NEW = {
    "before_reset_and_new_hour": [("q", "02:20", True), ("q", "06:10", False)],
    "after_reset": [("q", "02:40", True)],
    "merging": [("q", "02:40", True), ("q", "04:05", False)],
    "end_of_history": [("q", "04:40", True)],
    "past_the_limit": [("r", "01:55", True)],
    "nothing": [],
}

def rows(attempts, tag):
    out = []
    for i, (queue, hhmm, rollback) in enumerate(attempts):
        hour = hhmm[:2]
        out.append(
            f"({sql_string(queue)}, timestamp'2026-01-01 {hhmm}:00', null, 'f', {i}, "
            f"{sql_string(tag + str(i))}, {str(rollback).lower()}, "
            f"{sql_string(f'2026-01-01 {hour}:00:00')})"
        )
    return out

# A stream named by two columns (consumer, server) and ordered without attempt_id, as the
# consumer failure runs are: the reset at 02:30 is s1's, so s2's new failure at 02:20 goes on
# into 03 (its reset is at 03:40); with the consumer alone as the key it would not.
KEYED = (
    "consumer_id string, server_name string, attempted_at timestamp, source_file string, "
    "record_number bigint, attempt_key string, is_success boolean, p string"
)
KEYED_OLD = [
    ("s1", "02:10", False), ("s1", "02:30", True), ("s2", "02:50", False),
    ("s2", "03:10", False), ("s1", "03:20", False), ("s2", "03:40", True), ("s1", "04:10", True),
]

def keyed_rows(attempts, tag):
    return [
        f"('c', {sql_string(server)}, timestamp'2026-01-01 {hhmm}:00', 'f', {i}, "
        f"{sql_string(tag + str(i))}, {str(success).lower()}, "
        f"{sql_string(f'2026-01-01 {hhmm[:2]}:00:00')})"
        for i, (server, hhmm, success) in enumerate(attempts)
    ]

def segments(table, extensions):
    inline = (
        "{%- set s = rewrite_segments(api.Relation.create(schema='rs', identifier='t'), "
        f"'select * from rs.{table}', 'p', 'queue_key', 'not is_whole_transaction_rollback', "
        f"max_extensions={extensions}) -%}}"
        "{{ tojson(s) }}"
    )
    return json.loads(compile_inline(inline))

with connect("local") as e:
    e.execute("create database if not exists rs")
    e.execute(f"create table rs.t ({COLUMNS}) using parquet partitioned by (p)")
    e.execute(f"insert into rs.t values {', '.join(rows(OLD, 'old'))}")
    for name, attempts in NEW.items():
        e.execute(f"create table rs.{name} ({COLUMNS}) using parquet")
        if attempts:
            e.execute(f"insert into rs.{name} values {', '.join(rows(attempts, name))}")
    e.execute(f"create table rs.k ({KEYED}) using parquet partitioned by (p)")
    e.execute(f"insert into rs.k values {', '.join(keyed_rows(KEYED_OLD, 'old'))}")
    e.execute(f"create table rs.k_new ({KEYED}) using parquet")
    e.execute(f"insert into rs.k_new values {', '.join(keyed_rows([('s2', '02:20', False)], 'n'))}")
out = {name: segments(name, 1 if name == "past_the_limit" else 6) for name in NEW}

for name, key in (("two_keys", "['consumer_id', 'server_name']"), ("one_key", "'consumer_id'")):
    out[name] = json.loads(compile_inline(
        "{{ tojson(rewrite_segments(api.Relation.create(schema='rs', identifier='k'), "
        f"'select * from rs.k_new', 'p', {key}, 'is_success', order_columns=["
        "'attempted_at', 'source_file', 'record_number', 'attempt_key'])) }}"
    ))
print("@@" + json.dumps(out))
"""


def hours(*pairs: tuple[str, str]) -> list[list[str]]:
    return [[f"2026-01-01 {a}:00:00", f"2026-01-01 {b}:00:00"] for a, b in pairs]


@pytest.fixture(scope="module")
def found(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_a_late_attempt_before_a_reset_rewrites_its_hour_only(found: dict[str, Any]) -> None:
    # 02:20 is followed by q's reset at 02:30; 06:00 is a new hour at the end.
    assert found["before_reset_and_new_hour"] == hours(("02", "02"), ("06", "06"))


def test_an_island_going_on_takes_in_the_next_hour(found: dict[str, Any]) -> None:
    # After 02:40, q's next reset is at 03:20.
    assert found["after_reset"] == hours(("02", "03"))


def test_segments_that_grow_into_each_other_merge(found: dict[str, Any]) -> None:
    # 02 takes in 03 and touches 04; after 04:05 q only rolls back until the newest hour.
    assert found["merging"] == hours(("02", "05"))
    assert found["end_of_history"] == hours(("04", "05"))


def test_an_island_open_past_the_limit_rewrites_to_the_newest_hour(
    found: dict[str, Any],
) -> None:
    assert found["past_the_limit"] == hours(("01", "05"))
    assert found["nothing"] == []


def test_a_stream_named_by_two_columns_is_followed_per_pair(found: dict[str, Any]) -> None:
    assert found["two_keys"] == hours(("02", "03"))
    assert found["one_key"] == hours(("02", "02"))
