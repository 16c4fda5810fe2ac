"""Candidate files for `poisonwatch backtest --candidates`: validated before any SQL is made.

A file has the columns of seeds/candidate_policies.csv (failure policies) or of
seeds/candidate_consumer_policies.csv (circuit breakers), header first. Every value is checked
against its column's type; the first bad one is an error naming the file, the record (line) and
the field. `insert_statement` turns the validated rows into Spark SQL literals only.
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from poisonwatch.config import PoisonwatchError

# column -> type, in seed order (seeds/_seeds.yml column_types)
POLICY_COLUMNS: dict[str, str] = {
    "candidate_name": "string",
    "policy_name": "string",
    "broker_kind": "string",
    "queue_name": "string",
    "failure_threshold": "int",
    "max_delivery_attempts": "int",
    "permanent_error_threshold": "int",
    "validation_is_poison": "boolean",
    "action": "string",
    "error_code": "int",
    "error_description": "string",
    "redelivery_delay_ms": "bigint",
    "redelivery_multiplier": "double",
    "max_redelivery_delay_ms": "bigint",
    "park_delay_minutes": "int",
}
BREAKER_COLUMNS: dict[str, str] = {
    "candidate_name": "string",
    "consumer_id": "string",
    "max_consecutive_failures": "int",
    "breaker_mode": "string",
    "scheduled_group": "string",
    "description": "string",
}
_REQUIRED = {
    "candidate_name",
    "broker_kind",
    "queue_name",
    "consumer_id",
    "max_consecutive_failures",
}
_CHOICES = {
    "broker_kind": {"service_broker", "jms"},
    "breaker_mode": {"ANY", "MANY"},
    "action": {"end_conversation", "dead_letter", "park", "discard", "log_only"},
}


def _value(kind: str, text: str, where: str) -> Any:
    text = text.strip()
    if text == "":
        return None
    try:
        if kind in ("int", "bigint"):
            value: Any = int(text)
            if value < 0:
                raise ValueError("negative")
            return value
        if kind == "double":
            return float(text)
        if kind == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError("not true/false")
            return text.lower() == "true"
    except ValueError as exc:
        raise PoisonwatchError(f"{where}: {text!r} is not a valid {kind} ({exc})") from None
    if any(ord(ch) < 32 for ch in text):
        raise PoisonwatchError(f"{where}: control characters are not allowed")
    return text


def load_candidates(path: Path) -> tuple[str, list[dict[str, Any]]]:
    """Read a candidate file: ("policy" | "breaker", rows). Raises PoisonwatchError when bad."""
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            records = list(csv.reader(fh))
    except (OSError, UnicodeDecodeError) as exc:
        raise PoisonwatchError(f"{path}: cannot read the candidate file ({exc})") from None
    if not records:
        raise PoisonwatchError(f"{path}: empty file (a header row is needed)")
    header = [h.strip() for h in records[0]]
    kind, columns = "policy", POLICY_COLUMNS
    if header == list(BREAKER_COLUMNS):
        kind, columns = "breaker", BREAKER_COLUMNS
    elif header != list(POLICY_COLUMNS):
        raise PoisonwatchError(
            f"{path}, line 1: the header must be the columns of seeds/candidate_policies.csv "
            f"({','.join(POLICY_COLUMNS)}) or of seeds/candidate_consumer_policies.csv "
            f"({','.join(BREAKER_COLUMNS)}); got {','.join(header)}"
        )
    rows: list[dict[str, Any]] = []
    seen: set[tuple[Any, ...]] = set()
    for line, record in enumerate(records[1:], start=2):
        if not any(cell.strip() for cell in record):
            continue
        if len(record) != len(columns):
            raise PoisonwatchError(
                f"{path}, line {line}: {len(record)} fields, the header has {len(columns)}"
            )
        row = {}
        for (name, col_type), text in zip(columns.items(), record, strict=True):
            where = f"{path}, line {line}, field {name}"
            value = _value(col_type, text, where)
            if value is None and name in _REQUIRED:
                raise PoisonwatchError(f"{where}: a value is required")
            if name in _CHOICES and value is not None:
                if name == "broker_kind":
                    value = value.lower()
                if name == "breaker_mode":
                    value = value.upper()
                if value not in _CHOICES[name]:
                    raise PoisonwatchError(
                        f"{where}: {value!r} is not one of {', '.join(sorted(_CHOICES[name]))}"
                    )
            row[name] = value
        if row["candidate_name"] == "current":
            raise PoisonwatchError(
                f"{path}, line {line}, field candidate_name: `current` is reserved for the "
                "policies in force (always included)"
            )
        key = (
            (row["candidate_name"], row["broker_kind"], row["queue_name"])
            if kind == "policy"
            else (row["candidate_name"], row["consumer_id"])
        )
        if key in seen:
            raise PoisonwatchError(f"{path}, line {line}: a second row for {key}")
        seen.add(key)
        rows.append(row)
    if not rows:
        raise PoisonwatchError(f"{path}: no candidate rows after the header")
    return kind, rows


def _literal(kind: str, value: Any) -> str:
    if value is None:
        return f"cast(null as {kind})"
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("int", "bigint", "double"):
        return f"cast({value!r} as {kind})"
    escaped = str(value).replace("\\", "\\\\").replace("'", "\\'")
    return f"'{escaped}'"


def insert_statement(table: str, kind: str, rows: list[dict[str, Any]]) -> str:
    """`insert overwrite table <table> values …` of validated rows (literals, seed order)."""
    columns = POLICY_COLUMNS if kind == "policy" else BREAKER_COLUMNS
    values = ",\n".join(
        "(" + ", ".join(_literal(t, row[name]) for name, t in columns.items()) + ")" for row in rows
    )
    return f"insert overwrite table {table} values\n{values}"
