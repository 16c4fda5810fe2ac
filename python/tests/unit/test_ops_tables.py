"""The remediation ledgers are declared twice, by necessity: `poisonwatch apply` creates them
from Python (ledger.py) and dbt's on-run-start hook from `poisonwatch_ops_table_columns`
(macros/ops/create_ops_tables.sql), so that models work on a fresh store. Both must name the
same tables, columns and types, and the sources must declare every one of them."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from poisonwatch.remediation import ledger

ROOT = Path(__file__).resolve().parents[3]


def _macro_tables() -> dict[str, list[tuple[str, str]]]:
    text = (ROOT / "macros" / "ops" / "create_ops_tables.sql").read_text(encoding="utf-8")
    body = text[text.index("macro poisonwatch_ops_table_columns") :]
    tables: dict[str, list[tuple[str, str]]] = {}
    for name, columns in re.findall(r"'(\w+)': \[(.*?)\n\s*\]", body, re.S):
        tables[name] = re.findall(r"\('(\w+)', '(\w+)'\)", columns)
    return tables


def _python_tables() -> dict[str, list[tuple[str, str]]]:
    return {**ledger.UNPARTITIONED_TABLES, **ledger.EFFECT_TABLES}


def test_apply_and_the_dbt_hook_create_the_same_ledgers() -> None:
    macro, python = _macro_tables(), _python_tables()
    assert sorted(macro) == sorted(python)
    for table, columns in python.items():
        assert macro[table] == list(columns), table


def test_every_ledger_a_model_reads_is_a_declared_source_with_its_columns() -> None:
    sources = yaml.safe_load(
        (ROOT / "models" / "staging" / "ops" / "_ops__sources.yml").read_text(encoding="utf-8")
    )["sources"]
    declared = {
        t["name"]: [(c["name"], c["data_type"]) for c in t.get("columns", [])]
        for s in sources
        for t in s["tables"]
    }
    python = _python_tables()
    for table, columns in declared.items():
        assert table in python, table
        assert columns == list(python[table]), table
    read = {
        m
        for f in (ROOT / "models").rglob("*.sql")
        for m in re.findall(r"source\('(?:ops|remediation_ops)', '(\w+)'\)", f.read_text())
    }
    assert read <= set(declared)
    assert {"paused_queues", "resume_requests"} <= read


def test_only_the_effect_tables_are_partitioned_by_run_id() -> None:
    """Recovery drops an uncommitted run's partitions: the hook must partition exactly the
    tables apply creates partitioned (its effect tables)."""
    text = (ROOT / "macros" / "ops" / "create_ops_tables.sql").read_text(encoding="utf-8")
    unpartitioned = re.search(r"if table_name not in \(([^)]*)\)", text)
    assert unpartitioned is not None
    listed = set(re.findall(r"'(\w+)'", unpartitioned.group(1)))
    assert listed == set(ledger.UNPARTITIONED_TABLES)
