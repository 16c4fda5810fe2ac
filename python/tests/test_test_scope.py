"""Scoped data tests (macros/testing/test_scope_filter.sql, latest_scope_value.sql) check what the
latest run wrote, compared with a constant read at compile time: a defect in an earlier batch is
left alone, one in the latest batch fails the test, and the latest value reaches the SQL escaped
(a batch value with a quote and `;--`). Real dbt and Spark on the store these tests share
(conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from child_python import SharedChild

pytestmark = pytest.mark.slow

SCRIPT = """
import json
from dbt.cli.main import dbtRunner
from poisonwatch.config import home, project_root
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import connect
from poisonwatch.warehouse.schemas import create_raw_tables

root, store = str(project_root()), home()

def dbt_test():
    res = dbtRunner().invoke([
        "test", "--select", "source:service_broker.ssb_broker_events",
        "--project-dir", root, "--profiles-dir", root, "--target", "local", "--quiet",
        "--target-path", str(store / "dbt_target"), "--log-path", str(store / "logs"),
    ])
    assert res.result is not None, res.exception
    return [
        {"status": str(r.status), "failures": r.failures, "sql": r.node.compiled_code}
        for r in res.result.results
        if r.node.unique_id.startswith("test.")  # not the on-run-start hook
    ]

def land(engine, batch, server):
    server_sql = "null" if server is None else sql_string(server)
    engine.execute(
        f"insert into raw.ssb_broker_events partition (_batch_id = {sql_string(batch)}) "
        "(event_time, server_name, database_name, queue_name, event_type) values "
        f"(timestamp'2026-03-01 00:00:00', {server_sql}, 'Db', 'Q', 'BROKER_QUEUE_DISABLED')"
    )

out = {}
with connect("local") as e:
    create_raw_tables(e)
    land(e, "b20260301T000000Z_00000001", None)  # a defect in an earlier batch
    land(e, "b20260302T000000Z_00000002", "SQL1")
    out["old_defect"] = dbt_test()
    land(e, "b9';--x", None)  # the latest batch (sorts last), with a defect
    out["new_defect"] = dbt_test()
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT)


def test_a_defect_in_an_earlier_batch_is_left_alone(results: dict[str, Any]) -> None:
    (test,) = results["old_defect"]
    assert test["status"] == "pass", test
    # The latest batch, as a constant Spark can prune partitions with: no subquery over history.
    assert "_batch_id = cast('b20260302T000000Z_00000002' as string)" in test["sql"]
    assert "select max(" not in test["sql"]


def test_a_defect_in_the_latest_batch_fails_and_its_value_is_escaped(
    results: dict[str, Any],
) -> None:
    (test,) = results["new_defect"]
    assert test["status"] == "fail", test
    assert test["failures"] == 1, test
    assert "_batch_id = cast('b9\\';--x' as string)" in test["sql"]
