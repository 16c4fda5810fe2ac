"""`poisonwatch store rebuild`: a fresh store from a broken one, losing no landed data.

The embedded store is a Derby metastore (`metastore_db/`) beside a warehouse folder
(`warehouse/`). `config.spark_session` refuses to start on a store whose halves disagree and
names this command. It never deletes anything: the metastore and the warehouse are moved aside
(`<name>.orphan-<time>`), a fresh store is created, and the tables whose data exists nowhere
else are copied back from the old warehouse folder — `raw` (what ingest loaded, with its ledger
and rejects) and `poisonwatch_ops` (the apply ledgers: without them, actions would be applied
twice). The models are derived from those: `dbt build` re-creates them.
"""

from __future__ import annotations

import datetime as dt
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from poisonwatch.config import (
    PoisonwatchError,
    acquire_store_lock,
    home,
    load_profile,
    spark_session,
    target_name,
)
from poisonwatch.textsafe import terminal

# Databases whose tables are data, not derived from other tables.
KEPT_DATABASES = ("raw", "poisonwatch_ops")


@dataclass
class RebuildResult:
    moved: list[Path] = field(default_factory=list)
    restored: dict[str, int] = field(default_factory=dict)  # `db.table` -> rows
    built: bool = False


def _partition_columns(table_dir: Path) -> list[str]:
    """The `k=v` folder levels under a table folder (Hive layout), outermost first."""
    columns: list[str] = []
    level = table_dir
    while True:
        subs = sorted(p for p in level.iterdir() if p.is_dir() and "=" in p.name)
        if not subs:
            return columns
        columns.append(subs[0].name.split("=", 1)[0])
        level = subs[0]


def _data_files(table_dir: Path) -> bool:
    return any(p.is_file() and not p.name.startswith((".", "_")) for p in table_dir.rglob("*"))


def _restore(spark: object, old_warehouse: Path, result: RebuildResult) -> None:
    """Copy the kept databases' tables from the old warehouse folder into the fresh store."""
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")  # type: ignore[attr-defined]
    for database in KEPT_DATABASES:
        source = old_warehouse / f"{database}.db"
        if not source.is_dir():
            continue
        spark.sql(f"create database if not exists `{database}`")  # type: ignore[attr-defined]
        for table_dir in sorted(p for p in source.iterdir() if p.is_dir()):
            if table_dir.name.startswith((".", "_")) or not _data_files(table_dir):
                continue  # an empty table: ingest / dbt create it again when needed
            name = f"`{database}`.`{table_dir.name.replace('`', '``')}`"
            if (table_dir / "_delta_log").is_dir():
                # Only the current version: the folder also keeps files of deleted rows.
                frame = spark.read.format("delta").load(str(table_dir))  # type: ignore[attr-defined]
                detail = spark.sql(f"describe detail delta.`{table_dir}`").collect()[0]  # type: ignore[attr-defined]
                writer = frame.write.format("delta").mode("errorifexists")
                partitions = list(detail["partitionColumns"])
            else:
                frame = spark.read.option("basePath", str(table_dir)).parquet(str(table_dir))  # type: ignore[attr-defined]
                writer = frame.write.format("parquet").mode("errorifexists")
                partitions = _partition_columns(table_dir)
            if partitions:
                writer = writer.partitionBy(*partitions)
            writer.saveAsTable(name)
            result.restored[f"{database}.{table_dir.name}"] = spark.table(name).count()  # type: ignore[attr-defined]


def rebuild_store(build: bool = True, console: Console | None = None) -> RebuildResult:
    """Move the store's metastore and warehouse aside, start a fresh store, copy the raw and
    ops tables back, and (with `build`) run `dbt build` (models and data tests)."""
    name = target_name(None)
    if load_profile(name).get("method") != "session":
        raise PoisonwatchError(
            f"target {name!r} is not the embedded store: `store rebuild` repairs the local "
            "store only (a cluster's metastore is the cluster's)."
        )
    console = console or Console(stderr=True)
    acquire_store_lock()
    store = home()
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    result = RebuildResult()
    old_warehouse: Path | None = None
    for half in ("metastore_db", "warehouse"):
        path = store / half
        if path.exists():
            target = store / f"{half}.orphan-{stamp}"
            shutil.move(str(path), str(target))
            result.moved.append(target)
            if half == "warehouse":
                old_warehouse = target
    (store / "warehouse").mkdir()
    spark = spark_session(name)
    if old_warehouse is not None:
        _restore(spark, old_warehouse, result)
    for table, rows in sorted(result.restored.items()):
        console.print(f"restored {terminal(table)}: {rows:,} row(s)")
    if build:
        from poisonwatch.warehouse.dbtrun import run_dbt

        run_dbt(["build", "--exclude", "test_type:unit"])
        result.built = True
    for path in result.moved:
        console.print(f"kept the old {path.name.split('.orphan-')[0]} in {path}")
    return result
