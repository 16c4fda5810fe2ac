"""`poisonwatch sql`: run Spark SQL on the warehouse of the current target and print the rows."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import json
import sys
from typing import IO, Any

from rich.console import Console
from rich.table import Table

FORMATS = ("table", "csv", "json")


def _jsonable(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            return value.isoformat(timespec="microseconds") + "Z"
        return value.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if hasattr(value, "asDict"):
        return _jsonable(value.asDict(recursive=True))
    return value


def print_rows(
    columns: list[str],
    rows: list[tuple[Any, ...]],
    fmt: str,
    out: IO[str] | None = None,
    wide: bool = False,
) -> None:
    """Print rows as a rich table, CSV (with header) or JSON lines (one object per row).

    The table fits the terminal: one line per row, long values shortened with `…`; `wide`
    folds them instead, whole."""
    out = out or sys.stdout
    if fmt == "json":
        for row in rows:
            obj = {c: _jsonable(v) for c, v in zip(columns, row, strict=True)}
            out.write(json.dumps(obj, ensure_ascii=False) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns)
        for row in rows:
            writer.writerow(["" if v is None else _jsonable(v) for v in row])
    else:
        table = Table(show_lines=False)
        for c in columns:
            if wide:
                table.add_column(c, overflow="fold")
            else:
                table.add_column(c, overflow="ellipsis", no_wrap=True)
        for row in rows:
            table.add_row(*("" if v is None else str(_jsonable(v)) for v in row))
        Console(file=out).print(table)
        Console(file=sys.stderr).print(f"[dim]{len(rows)} row(s)[/dim]")


def run_sql(query: str, fmt: str = "table", target: str | None = None, wide: bool = False) -> int:
    """Run one Spark SQL statement on the current target and print its result."""
    from poisonwatch.warehouse.engine import connect

    with connect(target) as engine:
        columns, rows = engine.query(query)
    print_rows(columns, rows, fmt, wide=wide)
    return len(rows)
