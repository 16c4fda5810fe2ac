"""`poisonwatch sql --as-of`: the statement reads Delta tables as they were at a time, in the
runner's own Spark session; CTE names, aliases, subqueries and string literals stay as they
are, and views, non-Delta tables and bad times are refused with the name at fault."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = r"""
import contextlib, datetime, io, json, time
from poisonwatch.config import PoisonwatchError, spark_session
from poisonwatch.warehouse.asof import with_as_of
from poisonwatch.warehouse.engine import connect
from poisonwatch.warehouse.sqlrun import run_sql

spark = spark_session("local")
spark.sql("create database if not exists poisonwatch")
spark.sql("create table poisonwatch.poison_messages (message_key string, n int) using delta")
spark.sql("create table poisonwatch.dlq_messages (message_key string) using delta")
spark.sql("insert into poisonwatch.poison_messages values ('a', 1)")
spark.sql("insert into poisonwatch.dlq_messages values ('a')")
# A time between the first round's commits and the second's.
first_round = max(
    spark.sql(f"describe history poisonwatch.{t}").where("version = 1").collect()[0]["timestamp"]
    for t in ("poison_messages", "dlq_messages")
)
time.sleep(2)
as_of = (first_round + datetime.timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
spark.sql("insert into poisonwatch.poison_messages values ('b', 2)")
spark.sql("insert into poisonwatch.dlq_messages values ('b')")
spark.sql("create view poisonwatch.poison_view as select * from poisonwatch.poison_messages")
spark.sql("create table poisonwatch.plain (n int) using parquet")

QUERY = (
    "with recent as (select pm.message_key, pm.n from poisonwatch.poison_messages as pm "
    "where pm.message_key in (select message_key from `poisonwatch`.dlq_messages)) "
    "select recent.message_key, 'poisonwatch.poison_messages' as label, "
    "(select count(*) from poisonwatch.poison_messages version as of 0) as at_zero "
    "from recent order by 1"
)

def rows(query, **kw):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run_sql(query, fmt="json", target="local", **kw)
    return [json.loads(line) for line in out.getvalue().splitlines()]

def refused(query, as_of):
    try:
        rows(query, as_of=as_of)
    except PoisonwatchError as exc:
        return str(exc)
    return None

with connect("local") as engine:
    rewritten = with_as_of(engine, QUERY, as_of)

result = {
    "now": rows(QUERY),
    "then": rows(QUERY, as_of=as_of),
    "rewritten": rewritten,
    "view": refused("select * from poisonwatch.poison_view", as_of),
    "parquet": refused("select * from poisonwatch.plain", as_of),
    "bad_time": refused("select * from poisonwatch.poison_messages", "yesterday"),
    "no_table": refused("select 1", as_of),
    "missing": refused("select * from poisonwatch.nothing_here", as_of),
    "syntax": refused("selec * from poisonwatch.poison_messages", as_of),
    "before_creation": refused(
        "select * from poisonwatch.poison_messages", "2001-01-01T00:00:00Z"
    ),
}
print("RESULT " + json.dumps(result))
"""


def test_sql_as_of_reads_delta_tables_as_they_were(tmp_path: Path) -> None:
    env = dict(
        os.environ, POISONWATCH_HOME=str(tmp_path / "store"), POISONWATCH_FILE_FORMAT="delta"
    )
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))

    label = "poisonwatch.poison_messages"
    assert out["now"] == [
        {"message_key": "a", "label": label, "at_zero": 0},
        {"message_key": "b", "label": label, "at_zero": 0},
    ]
    assert out["then"] == [{"message_key": "a", "label": label, "at_zero": 0}]
    # Both tables got the clause, the string literal and the explicit version did not.
    assert out["rewritten"].count("timestamp as of") == 2
    assert "'poisonwatch.poison_messages' as label" in out["rewritten"]
    assert "version as of 0) as at_zero" in out["rewritten"]
    assert "poisonwatch.poison_view is a view" in out["view"]
    assert "poisonwatch.plain is a parquet table" in out["parquet"]
    assert "'yesterday' is not a time" in out["bad_time"]
    assert out["no_table"] == "--as-of: the statement reads no table"
    assert "no table 'poisonwatch.nothing_here'" in out["missing"]
    assert out["before_creation"].startswith("the query failed")
    assert out["syntax"].startswith("the query failed") and "PARSE_SYNTAX_ERROR" in out["syntax"]
