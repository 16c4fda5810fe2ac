"""A table's partition values and their removal, on Delta and on Parquet tables.

A run that crashed leaves rows in partitions of its own (`_batch_id` of an ingest, `run_id`
of an apply) that its commit point never named; recovery removes them. Parquet tables list
and drop partitions in the metastore; Delta tables keep partitions in their log, so their
values come from a query and their rows go with a `delete` on the partition column, which
Delta does by removing whole files.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Iterable
from typing import Any

from poisonwatch.textsafe import sql_string


def table_information(engine: Any, table: str) -> dict[str, str]:
    """`describe table extended` of `table` (quoted name) as lower-case names to values:
    `type` (MANAGED, VIEW, …), `provider` (delta, parquet, …), `location`, …"""
    _, rows = engine.query(f"describe table extended {table}")
    return {str(r[0]).strip().lower(): str(r[1]).strip() for r in rows if r[0] is not None}


def table_provider(engine: Any, table: str) -> str:
    """`delta`, `parquet`, … of `table` (quoted name)."""
    return table_information(engine, table).get("provider", "").lower()


def partition_values(engine: Any, table: str, column: str) -> list[str] | None:
    """The values of partition column `column` in `table`; None when it is not partitioned
    by that column."""
    if table_provider(engine, table) == "delta":
        names, rows = engine.query(f"describe detail {table}")
        columns = rows[0][list(names).index("partitionColumns")] if rows else []
        if isinstance(columns, str):  # over Thrift an array arrives as JSON text
            columns = json.loads(columns)
        if column not in list(columns or []):
            return None
        _, rows = engine.query(f"select distinct `{column}` from {table}")
        return sorted(str(r[0]) for r in rows if r[0] is not None)
    try:
        _, rows = engine.query(f"show partitions {table}")
    except Exception:
        return None
    out = []
    for spec, *_rest in rows:
        for part in str(spec).split("/"):
            key, _, value = part.partition("=")
            if key == column:
                out.append(urllib.parse.unquote(value))
    return out if out or not rows else None


def drop_partitions(engine: Any, table: str, column: str, values: Iterable[str]) -> None:
    """Remove every row of `table` whose partition column `column` is one of `values`."""
    values = sorted(set(values))
    if not values:
        return
    if table_provider(engine, table) == "delta":
        listed = ", ".join(sql_string(v) for v in values)
        engine.execute(f"delete from {table} where `{column}` in ({listed})")
        return
    for value in values:
        engine.execute(
            f"alter table {table} drop if exists partition (`{column}` = {sql_string(value)})"
        )
