"""How many buckets a full refresh of int_receive_attempts_sequenced creates
(macros/incremental/message_bucket_count.sql, used by the project's spark__clustered_cols): one
per `attempts_per_bucket` receive attempts in the ingest ledger, at least one, at most the
model's `buckets`; other datasets do not count. Real dbt and Spark on the store these tests
share (conftest.py), with ledger tables of their own. test_incremental.py checks the table a
full refresh creates through the override on its 6,000 attempts (one bucket, against eight
without it) and that a per-message aggregate still reads it without a shuffle;
test_generic_tests.py that bad arguments are compile errors."""

from __future__ import annotations

from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from support.child_dbt import compile_inline
from poisonwatch.warehouse.engine import connect

LEDGER = (
    "content_hash string, dataset string, source_file string, file_bytes bigint, "
    "loaded_records bigint, rejected_records bigint"
)
FILES = {
    "mb_empty": [],
    "mb_small": [("ssb_receive_attempts", 4000), ("jms_receive_attempts", 2000),
                 ("jms_queue_snapshots", 900000)],
    "mb_twenty_thousand": [("ssb_receive_attempts", 12000), ("jms_receive_attempts", 8000)],
    "mb_just_over": [("ssb_receive_attempts", 37501)],
    "mb_one_million": [("ssb_receive_attempts", 600000), ("jms_receive_attempts", 400000)],
}

def count(table, max_buckets, per_bucket):
    return compile_inline(
        "{{ message_bucket_count(" + str(max_buckets) + ", " + str(per_bucket)
        + ", api.Relation.create(schema='mb', identifier='" + table + "')) }}"
    ).strip()

with connect("local") as e:
    e.execute("create database if not exists mb")
    for table, rows in FILES.items():
        e.execute(f"create table mb.{table} ({LEDGER}) using parquet")
        if rows:
            values = ", ".join(
                f"('h{i}', '{dataset}', 'f{i}', 1, {n}, 0)"
                for i, (dataset, n) in enumerate(rows)
            )
            e.execute(f"insert into mb.{table} values {values}")
out = {table: count(table, 8, 12500) for table in FILES}
out["max_one"] = count("mb_one_million", 1, 12500)
out["per_bucket_small"] = count("mb_small", 8, 1000)
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def found(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_one_bucket_per_landed_attempts_at_least_one(found: dict[str, Any]) -> None:
    assert found["mb_empty"] == "1"
    # 6,000 attempts (the snapshots' 900,000 records are not attempts): one bucket.
    assert found["mb_small"] == "1"
    assert found["per_bucket_small"] == "6"
    assert found["mb_twenty_thousand"] == "2"
    assert found["mb_just_over"] == "4"


def test_never_more_than_the_configured_buckets(found: dict[str, Any]) -> None:
    assert found["mb_one_million"] == "8"
    assert found["max_one"] == "1"
