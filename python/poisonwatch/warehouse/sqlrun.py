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

from poisonwatch.config import PoisonwatchError
from poisonwatch.textsafe import csv_cell, json_text, terminal

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


# A table cell shows at most this much of a value (csv and json give it whole).
CELL_CHARS = 2000


def _csv_value(value: Any) -> Any:
    """Text cells neutralised against spreadsheet formulas; numbers stay numbers."""
    if isinstance(value, bool | int | float | decimal.Decimal):
        return value
    plain = _jsonable(value)
    if isinstance(plain, list | dict):
        plain = json.dumps(plain, ensure_ascii=False)
    return csv_cell(plain)


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
    # Values come from the watched systems (message bodies, error texts): every format keeps
    # them inert (poisonwatch.textsafe). JSON keeps them exact: json escapes control
    # characters, and bidi / invisible characters are written as \\u escapes.
    if fmt == "json":
        for row in rows:
            obj = {c: _jsonable(v) for c, v in zip(columns, row, strict=True)}
            out.write(json_text(json.dumps(obj, ensure_ascii=False)) + "\n")
    elif fmt == "csv":
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow([csv_cell(c) for c in columns])
        for row in rows:
            writer.writerow(["" if v is None else _csv_value(v) for v in row])
    else:
        table = Table(show_lines=False)
        for c in columns:
            if wide:
                table.add_column(terminal(c), overflow="fold")
            else:
                table.add_column(terminal(c), overflow="ellipsis", no_wrap=True)
        for row in rows:
            table.add_row(
                *("" if v is None else terminal(_jsonable(v), limit=CELL_CHARS) for v in row)
            )
        Console(file=out).print(table)
        Console(file=sys.stderr).print(f"[dim]{len(rows)} row(s)[/dim]")


def run_sql(
    query: str,
    fmt: str = "table",
    target: str | None = None,
    wide: bool = False,
    as_of: str | None = None,
) -> int:
    """Run one Spark SQL statement on the current target and print its result; with `as_of`,
    on the Delta tables as they were at that time."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    from poisonwatch.warehouse.engine import LocalEngine, connect

    with connect(target, reads_only=True) as engine:
        if as_of is not None and not isinstance(engine, LocalEngine):
            raise PoisonwatchError(
                f"--as-of needs Spark's parser in a local driver; on the target "
                f"{engine.target!r} write `timestamp as of '…'` after each table instead"
            )
        try:
            if as_of is not None:
                from poisonwatch.warehouse.asof import with_as_of

                query = with_as_of(engine, query, as_of)
            columns, rows = engine.query(query)
        except (PySparkException, Py4JJavaError) as exc:
            # The user's own statement failed: Spark's message, not a Python traceback.
            raise PoisonwatchError(f"the query failed: {spark_error_summary(exc)}") from None
    print_rows(columns, rows, fmt, wide=wide)
    return len(rows)


def spark_error_summary(exc: BaseException, max_lines: int = 4) -> str:
    """Spark's error class and message without its query plan and JVM stack (first lines)."""
    text = str(exc).split("\n\tat ", 1)[0]
    lines = [line for line in text.splitlines() if line.strip()]
    # A plan follows the message, starting with a line like `'Project [*]` or `+- ...`.
    kept = []
    for line in lines:
        if line.lstrip().startswith(("'", "+-", ":-", "== ", "JVM stacktrace")):
            break
        kept.append(line)
    return "\n".join(kept[:max_lines]) or text[:500]
