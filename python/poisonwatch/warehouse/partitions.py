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
from collections.abc import Iterable, Sequence
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


def _delta_partition_columns(engine: Any, table: str) -> list[str]:
    """The partition columns of Delta table `table` (quoted name), from its log."""
    names, rows = engine.query(f"describe detail {table}")
    columns = rows[0][list(names).index("partitionColumns")] if rows else []
    if isinstance(columns, str):  # over Thrift an array arrives as JSON text
        columns = json.loads(columns)
    return [str(c) for c in columns or []]


def _metastore_partition_values(engine: Any, table: str, column: str) -> list[str] | None:
    """A Parquet table's values of `column` from the metastore's partitions; None when it is
    not partitioned by that column."""
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


def partition_values_by_table(
    engine: Any, tables: Sequence[str], column: str
) -> dict[str, list[str] | None]:
    """`partition_values` of each of `tables` (quoted names). The Delta tables' values come
    from one query for all of them: recovery lists every raw table or ledger at each start."""
    found: dict[str, list[str] | None] = {}
    delta: list[str] = []
    for table in tables:
        if table_provider(engine, table) != "delta":
            found[table] = _metastore_partition_values(engine, table, column)
        elif column in _delta_partition_columns(engine, table):
            delta.append(table)
        else:
            found[table] = None
    if delta:
        _, rows = engine.query(
            " union all ".join(
                f"select {i} as t, cast(`{column}` as string) as v from {table} group by `{column}`"
                for i, table in enumerate(delta)
            )
        )
        for i, table in enumerate(delta):
            found[table] = sorted(str(v) for t, v in rows if int(t) == i and v is not None)
    return {table: found[table] for table in tables}


def partition_values(engine: Any, table: str, column: str) -> list[str] | None:
    """The values of partition column `column` in `table`; None when it is not partitioned
    by that column."""
    return partition_values_by_table(engine, [table], column)[table]


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
