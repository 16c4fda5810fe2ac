"""The benchmark's two plain-Spark floors and the slowest dbt nodes of a step.

`floor_sequence`: the least work any answer to "which messages are poison" must do — read every
raw attempt, order each message's attempts by time with one window (`lag`), find each message's
longest run of consecutive rollbacks, write it as Parquet.

`floor_ingest`: the least work any ingest must do — read the landing files (jsonl, jsonl.gz, csv,
parquet; every column as text, no validation) and write them as Parquet.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from poisonwatch.config import PoisonwatchError

# A rollback: the attempt's transaction rolled back and the message went back to its queue.
SSB_ROLLBACKS = ("rolled_back", "rolled_back_to_savepoint")
JMS_ROLLBACKS = ("rolled_back",)
SLOWEST = 10


def floor_sequence(spark: Any, out_dir: Path, raw_database: str = "raw") -> None:
    """Write each message's longest run of consecutive rollbacks to `out_dir` (Parquet). One
    window specification: one sort of the attempts."""
    from pyspark.sql import Window
    from pyspark.sql import functions as fn

    ssb = spark.table(f"{raw_database}.ssb_receive_attempts").select(
        fn.concat_ws(
            "\u0001",
            "server_name",
            "database_name",
            "queue_name",
            "conversation_handle",
            fn.col("message_sequence_number").cast("string"),
        ).alias("message"),
        "attempted_at",
        fn.col("outcome").isin(*SSB_ROLLBACKS).alias("is_rollback"),
    )
    jms = spark.table(f"{raw_database}.jms_receive_attempts").select(
        fn.concat_ws("\u0001", "broker_name", "queue_name", "message_id").alias("message"),
        "attempted_at",
        fn.col("outcome").isin(*JMS_ROLLBACKS).alias("is_rollback"),
    )
    attempts = ssb.unionByName(jms)
    in_order = Window.partitionBy("message").orderBy("attempted_at")
    so_far = in_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    previous = fn.lag("is_rollback").over(in_order)
    # A run starts at a rollback whose previous attempt was not one; its id is the number of
    # starts so far, over the same window (so still one sort).
    starts = attempts.withColumn(
        "run_start",
        (fn.col("is_rollback") & fn.coalesce(~previous, fn.lit(True))).cast("int"),
    )
    runs = starts.withColumn("run_id", fn.sum("run_start").over(so_far))
    # Per (message, run): the run's rollbacks (the attempts after it up to the next run carry
    # its id but are not rollbacks), then per message the longest; messages without a rollback
    # get 0. Both groupings are by keys the window already clustered on: no further shuffle.
    result = (
        runs.groupBy("message", "run_id")
        .agg(fn.sum(fn.col("is_rollback").cast("int")).alias("run_length"))
        .groupBy("message")
        .agg(fn.max("run_length").alias("longest_rollback_run"))
    )
    shutil.rmtree(out_dir, ignore_errors=True)
    result.write.mode("overwrite").parquet(str(out_dir))


def _landing_format(files: list[Path]) -> str:
    kinds = {
        "parquet" if f.name.endswith(".parquet") else "csv" if f.name.endswith(".csv") else "json"
        for f in files
    }
    if len(kinds) != 1:
        raise PoisonwatchError(f"{files[0].parent}: mixed landing formats {sorted(kinds)}")
    return kinds.pop()


def floor_ingest(spark: Any, landing: Path, out_dir: Path) -> None:
    """Read every landing dataset folder with Spark's plain readers (every column as text) and
    write each as Parquet under `out_dir/<dataset>`."""
    from pyspark.sql.types import StringType, StructField, StructType

    from poisonwatch.warehouse.schemas import DATASETS

    shutil.rmtree(out_dir, ignore_errors=True)
    for folder in sorted(p for p in landing.iterdir() if p.is_dir()):
        dataset = DATASETS.get(folder.name)
        files = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
        if dataset is None or not files:
            continue
        kind = _landing_format(files)
        paths = [str(f) for f in files]
        if kind == "parquet":
            frame = spark.read.parquet(*paths)
        else:
            schema = StructType([StructField(c, StringType()) for c in dataset.column_names])
            reader = spark.read.schema(schema)
            frame = (
                reader.option("header", "true").csv(paths) if kind == "csv" else reader.json(paths)
            )
        frame.write.mode("overwrite").parquet(str(out_dir / folder.name))


def parquet_rows(spark: Any, path: Path) -> int:
    """Rows of a Parquet folder (untimed: checks what a floor wrote)."""
    return int(spark.read.parquet(str(path)).count())


def slowest_nodes(run_results: Path, limit: int = SLOWEST) -> list[list[Any]]:
    """The `limit` slowest nodes of a dbt invocation (its target/run_results.json), slowest
    first, as [node, seconds] with node `<resource type> <name>`."""
    if not run_results.is_file():
        return []
    data = json.loads(run_results.read_text(encoding="utf-8"))
    nodes = []
    for result in data.get("results", []):
        parts = str(result.get("unique_id", "")).split(".")
        name = f"{parts[0]} {parts[2]}" if len(parts) >= 3 else str(result.get("unique_id"))
        nodes.append([name, round(float(result.get("execution_time") or 0.0), 2)])
    nodes.sort(key=lambda n: (-n[1], n[0]))
    return nodes[:limit]
