"""Scoped data tests (macros/testing/test_scope_filter.sql) of landing data check the batches
after the one `poisonwatch build` passes (POISONWATCH_BATCHES_SINCE, the newest batch its last
recorded build had seen), as a literal: a defect in an earlier batch is left alone, one in a
later batch fails the test; without the variable every row is checked, as dbt would; a value
that is not a batch id is refused. Real dbt and Spark on the store these tests share
(conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

# What both scripts start with: dbt in this child, on the project and the child's store.
PRELUDE = """
import json
import os
from dbt.cli.main import dbtRunner
from poisonwatch.config import home, project_root
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import connect
from poisonwatch.warehouse.partitions import drop_partitions, table_provider
from poisonwatch.warehouse.schemas import create_raw_tables

root, store = str(project_root()), home()

# The ledger row ingest writes last: source tests read committed batches only.
def commit(engine, batch, dataset):
    engine.execute(
        "insert into raw.ingested_files (content_hash, dataset, source_file, _batch_id) values "
        f"({sql_string(batch)}, {sql_string(dataset)}, 'scope.jsonl', {sql_string(batch)})"
    )

# The batches' rows and ledger rows gone again: the store is shared with modules that ingest
# and build.
def forget(engine, dataset, batches):
    drop_partitions(engine, f"`raw`.`{dataset}`", "_batch_id", batches)
    if table_provider(engine, "`raw`.`ingested_files`") == "delta":
        listed = ", ".join(sql_string(b) for b in batches)
        engine.execute(f"delete from raw.ingested_files where _batch_id in ({listed})")
        return
    ledger = engine.spark.table("raw.ingested_files")
    kept = [r for r in ledger.collect() if r["_batch_id"] not in batches]
    engine.spark.createDataFrame(kept, ledger.schema).write.insertInto(
        "raw.ingested_files", overwrite=True
    )

def dbt(*args):
    res = dbtRunner().invoke([
        *args, "--project-dir", root, "--profiles-dir", root, "--target", "local", "--quiet",
        "--target-path", str(store / "dbt_target"), "--log-path", str(store / "logs"),
    ])
    assert res.result is not None, res.exception
    return res.result.results
"""

SCRIPT = (
    PRELUDE
    + """
def dbt_test(since=None):
    if since is not None:
        os.environ["POISONWATCH_BATCHES_SINCE"] = since
    try:
        results = dbt("test", "--select", "source:service_broker.ssb_broker_events")
    finally:
        os.environ.pop("POISONWATCH_BATCHES_SINCE", None)
    return [
        {"status": str(r.status), "failures": r.failures, "sql": r.node.compiled_code,
         "message": r.message or ""}
        for r in results
        if r.node.unique_id.startswith("test.")  # not the on-run-start hook
    ]

def land(engine, batch, server):
    server_sql = "null" if server is None else sql_string(server)
    engine.execute(
        f"insert into raw.ssb_broker_events partition (_batch_id = {sql_string(batch)}) "
        "(event_time, server_name, database_name, queue_name, event_type) values "
        f"(timestamp'2026-03-01 00:00:00', {server_sql}, 'Db', 'Q', 'BROKER_QUEUE_DISABLED')"
    )
    commit(engine, batch, "ssb_broker_events")

EARLIER, CLEAN, LATER = (
    "b20260301T000000Z_00000001", "b20260302T000000Z_00000002", "b20260303T000000Z_00000003",
)
out = {}
with connect("local") as e:
    create_raw_tables(e)
    land(e, EARLIER, None)  # a defect in an earlier batch
    land(e, CLEAN, "SQL1")
    try:
        out["old_defect"] = dbt_test(since=EARLIER)
        out["every_row"] = dbt_test()
        out["refused"] = dbt_test(since="b9';--x")
        land(e, LATER, None)  # a later batch, with a defect
        out["new_defect"] = dbt_test(since=EARLIER)
    finally:
        forget(e, "ssb_broker_events", [EARLIER, CLEAN, LATER])
print("@@" + json.dumps(out))
"""
)


# A staging view's renamed or lowercased landing columns are tested on the landing table only
# (models/staging/*/_*__models.yml): that is sound because a failed source test skips the view and
# everything built from it. A bad outcome in the latest batch of the JMS attempts, then the
# production build's selection for that source; the batch is dropped again (the store is shared).
SOURCE_GATE_SCRIPT = (
    PRELUDE
    + """
batch = "b99999999T000000Z_sourcegate"
with connect("local") as e:
    create_raw_tables(e)
    e.execute(
        f"insert into raw.jms_receive_attempts partition (_batch_id = {sql_string(batch)}) "
        "(attempted_at, broker_name, address, queue_name, message_id, consumer_id, server_name, "
        "outcome) values (timestamp'2026-03-01 00:00:00', 'B', 'A', 'Q', 'ID:1', 'C', 'S', "
        "'Rolled_Forward')"
    )
    commit(e, batch, "jms_receive_attempts")
    try:
        results = dbt(
            "build", "--select", "source:jms.jms_receive_attempts+",
            "--exclude-resource-type", "unit_test", "--exclude", "tag:on_demand",
        )
    finally:
        forget(e, "jms_receive_attempts", [batch])
print("@@" + json.dumps({r.node.unique_id: str(r.status) for r in results}))
"""
)


@pytest.fixture(scope="module")
def results(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_a_defect_in_an_earlier_batch_is_left_alone(results: dict[str, Any]) -> None:
    (test,) = results["old_defect"]
    assert test["status"] == "pass", test
    # The batches after the bound, as a constant Spark can prune partitions with.
    assert "_batch_id > 'b20260301T000000Z_00000001'" in test["sql"], test["sql"]
    assert "select max(" not in test["sql"]


def test_without_a_bound_every_row_is_checked(results: dict[str, Any]) -> None:
    (test,) = results["every_row"]
    assert test["status"] == "fail" and test["failures"] == 1, test
    assert "_batch_id >" not in test["sql"], test["sql"]


def test_a_defect_in_a_later_batch_fails(results: dict[str, Any]) -> None:
    (test,) = results["new_defect"]
    assert test["status"] == "fail", test
    assert test["failures"] == 1, test


def test_a_bound_that_is_not_a_batch_id_is_refused(results: dict[str, Any]) -> None:
    (test,) = results["refused"]
    assert test["status"] == "error", test
    assert "POISONWATCH_BATCHES_SINCE must be a batch id" in test["message"], test


def test_a_failed_source_test_skips_the_staging_view_and_what_is_built_from_it(
    shared_store: SharedChild,
) -> None:
    statuses = shared_store.run(SOURCE_GATE_SCRIPT)
    failed = [u for u, s in statuses.items() if s == "fail"]
    assert len(failed) == 1 and failed[0].startswith(
        "test.poisonwatch.source_accepted_values_jms_jms_receive_attempts_outcome"
    ), statuses
    assert statuses["model.poisonwatch.stg_jms__receive_attempts"] == "skipped"
    assert statuses["model.poisonwatch.int_receive_attempts_sequenced"] == "skipped"
    assert statuses["model.poisonwatch.poison_messages"] == "skipped"
    ran = {u for u, s in statuses.items() if s not in ("skipped", "fail")}
    assert all(u.startswith(("operation.", "test.poisonwatch.source_")) for u in ran), ran
