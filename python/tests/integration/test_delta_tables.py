"""Delta Lake in the runner's own Spark session (Delta's jars on the driver's class path): the
raw tables and ledgers created in the project's table format, and the recovery helpers that
list and remove a crashed run's partitions (poisonwatch.warehouse.partitions) on a Delta table
as on a Parquet one. What the models do on Delta is run by `make demo` with
POISONWATCH_FILE_FORMAT=delta."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import json
from poisonwatch.config import spark_session
from poisonwatch.warehouse.engine import connect
from poisonwatch.warehouse.partitions import (
    drop_partitions, partition_values, partition_values_by_table, table_provider)
from poisonwatch.warehouse.schemas import create_raw_tables

out = {}
spark = spark_session("local")
with connect("local") as engine:
    create_raw_tables(engine)
    out["raw_provider"] = table_provider(engine, "`raw`.`ssb_receive_attempts`")
    for fmt in ("delta", "parquet"):
        t = f"`default`.`runs_{fmt}`"
        engine.execute(
            f"create table {t} (n int, run_id string) using {fmt} partitioned by (run_id)"
        )
        engine.execute(f"insert into {t} values (1, 'r1'), (2, 'r2'), (3, 'r2'), (4, 'it''s')")
        before = partition_values(engine, t, "run_id")
        drop_partitions(engine, t, "run_id", ["r2"])
        drop_partitions(engine, t, "run_id", ["it's", "it's"])
        drop_partitions(engine, t, "run_id", [])
        out[fmt] = {
            "provider": table_provider(engine, t),
            "before": before,
            "after": partition_values(engine, t, "run_id"),
            "other_column": partition_values(engine, t, "n"),
            "rows": [r[0] for r in engine.query(f"select n from {t}")[1]],
        }
    # Several tables at once (recovery's listing): Delta ones in one query, the others as one.
    many = [f"`default`.`many_{name}`" for name in ("delta", "parquet", "empty")]
    for t, fmt in zip(many, ("delta", "parquet", "delta")):
        engine.execute(
            f"create table {t} (n int, run_id string) using {fmt} partitioned by (run_id)"
        )
    for t in many[:2]:
        engine.execute(f"insert into {t} values (1, 'a'), (2, 'b'), (3, 'b')")
    many += ["`raw`.`ssb_receive_attempts`", "`default`.`runs_delta`"]
    out["many"] = partition_values_by_table(engine, many, "run_id")
    names, rows = engine.query("describe history `default`.`runs_delta`")
    out["history"] = [r[list(names).index("operation")] for r in rows]
print("RESULT " + json.dumps(out))
"""


def test_delta_tables_and_partition_recovery(tmp_path: Path) -> None:
    env = dict(
        os.environ,
        POISONWATCH_HOME=str(tmp_path / "store"),
        POISONWATCH_FILE_FORMAT="delta",
    )
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600
    )
    lines = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-4000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert out["raw_provider"] == "delta"
    for fmt in ("delta", "parquet"):
        got = out[fmt]
        assert got["provider"] == fmt, got
        assert sorted(got["before"]) == ["it's", "r1", "r2"], got
        assert got["after"] == ["r1"], got
        assert got["other_column"] is None, got
        assert got["rows"] == [1], got
    listed = {t: None if v is None else sorted(v) for t, v in out["many"].items()}
    assert listed == {
        "`default`.`many_delta`": ["a", "b"],
        "`default`.`many_parquet`": ["a", "b"],
        "`default`.`many_empty`": [],
        "`raw`.`ssb_receive_attempts`": None,
        "`default`.`runs_delta`": ["r1"],
    }, listed
    # On Delta each removal is one commit, visible in the table's history; none removes nothing.
    assert out["history"].count("DELETE") == 2, out["history"]
