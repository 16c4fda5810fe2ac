"""The project's own generic data tests (tests/generic/), rendered by real dbt and run by real
Spark over rows made to fail them: a test that cannot fail guards nothing."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

# One inline query per case; the child compiles each with dbt and runs it on Spark.
CASES = {
    "nulls": "{{ test_not_null_columns('pw_rows', ['a', 'b', 'c']) }}",
    "clean": "{{ test_not_null_columns('pw_rows', ['b']) }}",
    "empty": "{{ test_not_null_columns('(select * from pw_rows where false)', ['a', 'c']) }}",
    "injected": "{{ test_not_null_columns('pw_rows', [\"a'; drop table x;--\"]) }}",
    "string": "{{ test_not_null_columns('pw_rows', 'a') }}",
    # accepted_values_columns: b holds x, y, z, w; a (as text) 1, null, null, 4.
    "accepted": (
        "{{ test_accepted_values_columns('pw_rows', {'b': ['x', 'y'], 'a': ['1', '4']}) }}"
    ),
    "accepted_clean": (
        "{{ test_accepted_values_columns('pw_rows', "
        "{'b': ['w', 'x', 'y', 'z'], 'c': ['3', '5']}) }}"
    ),
    # A value with a quote, accepted (the literal is escaped) and not (the row names it).
    "accepted_quote_ok": (
        "{{ test_accepted_values_columns(\"(select concat('it', char(39), 's;--') as q)\", "
        "{'q': [\"it's;--\"]}) }}"
    ),
    "accepted_quote_bad": (
        "{{ test_accepted_values_columns(\"(select concat('it', char(39), 's;--') as q)\", "
        "{'q': ['x']}) }}"
    ),
    "accepted_not_list": "{{ test_accepted_values_columns('pw_rows', {'b': 'x'}) }}",
    "accepted_not_mapping": "{{ test_accepted_values_columns('pw_rows', ['b']) }}",
    "accepted_injected": (
        "{{ test_accepted_values_columns('pw_rows', {\"b'; drop table x;--\": ['x']}) }}"
    ),
    "accepted_number": "{{ test_accepted_values_columns('pw_rows', {'a': [1, 4]}) }}",
}
# tests/generic/primary_key.sql: unique and not null in one scan, on a column or on
# column_names; nullable_columns are key parts grouped on but not required. One failing row
# per case (a row with a null key part does not sort beside one without).
PK_DUP = "(select * from values ('a', 'p1'), ('a', 'p1'), ('a', 'p2'), ('b', 'p1') as t(k, p))"
PK_NULL = "(select * from values ('a', 'p1'), (null, 'p1'), ('b', null) as t(k, p))"
PK_NULL_DUP = "(select * from values (null, 'p1'), (null, 'p1'), ('a', 'p1') as t(k, p))"
PK_UNIQUE = "(select * from values ('a', 'p1'), ('a', 'p2'), ('b', 'p1') as t(k, p))"
CASES.update(
    {
        "pk_column_dup": f'{{{{ test_primary_key("{PK_DUP}", "k") }}}}',
        "pk_composite_dup": f'{{{{ test_primary_key("{PK_DUP}", column_names=["k", "p"]) }}}}',
        "pk_column_null": f'{{{{ test_primary_key("{PK_NULL}", "k") }}}}',
        "pk_nullable_part": (
            f'{{{{ test_primary_key("{PK_NULL}", column_names=["k", "p"], '
            'nullable_columns=["p"]) }}'
        ),
        "pk_nullable_dup": (
            f'{{{{ test_primary_key("{PK_NULL_DUP}", column_names=["k", "p"], '
            'nullable_columns=["k"]) }}'
        ),
        "pk_clean": "{{ test_primary_key('pw_rows', 'b') }}",
        "pk_clean_composite": f'{{{{ test_primary_key("{PK_UNIQUE}", column_names=["k", "p"]) }}}}',
        "pk_empty_table": (
            "{{ test_primary_key('(select * from pw_rows where false)', column_names=['a']) }}"
        ),
        "pk_both": "{{ test_primary_key('pw_rows', 'a', ['b']) }}",
        "pk_neither": "{{ test_primary_key('pw_rows') }}",
        "pk_string": "{{ test_primary_key('pw_rows', column_names='a') }}",
        "pk_empty_list": "{{ test_primary_key('pw_rows', column_names=[]) }}",
        "pk_injected": (
            "{{ test_primary_key('pw_rows', column_names=[\"a'; drop table x;--\"]) }}"
        ),
        "pk_column_injected": "{{ test_primary_key('pw_rows', \"a'--\") }}",
        "pk_nullable_not_key": (
            "{{ test_primary_key('pw_rows', column_names=['a'], nullable_columns=['c']) }}"
        ),
        "pk_nullable_string": (
            "{{ test_primary_key('pw_rows', column_names=['a'], nullable_columns='a') }}"
        ),
    }
)
# tests/generic/relationships_in_partitions.sql: dbt's relationships with the parent read only
# in the child's partitions, beside dbt's built-in test. Child keys a (partition p1), b (p2),
# c (it's;--), d (p1); the parent holds a and b in their partitions, c in the partition with
# the quote, and d only in another partition (p9): d moved, which the partitioned test reports
# and dbt's plain test cannot see; e is missing from the parent altogether.
REL_CHILD = (
    "(select * from values ('a', 'p1'), ('b', 'p2'), ('c', concat('it', char(39), 's;--')),"
    " ('d', 'p1'), (null, 'p1') as t(k, p))"
)
REL_PARENT = (
    "(select * from values ('a', 'p1'), ('b', 'p2'), ('c', concat('it', char(39), 's;--')),"
    " ('d', 'p9') as t(k, p))"
)
REL_CHILD_E = REL_CHILD.replace("(null, 'p1')", "('e', 'p2')")
for name, child, partition in (
    ("rel_parts", REL_CHILD, "'p'"),
    ("rel_plain", REL_CHILD, None),
    ("rel_parts_missing", REL_CHILD_E, "'p'"),
    ("rel_plain_missing", REL_CHILD_E, None),
    ("rel_parts_empty", "(select * from values ('a', 'p1') as t(k, p) where k = 'z')", "'p'"),
    ("rel_parts_injected", REL_CHILD, '"p\'--"'),
):
    CASES[name] = (
        f'{{{{ test_relationships("{child}", "k", "{REL_PARENT}", "k") }}}}'
        if partition is None
        else f'{{{{ test_relationships_in_partitions("{child}", "k", "{REL_PARENT}", "k", '
        f"partition_column={partition}) }}}}"
    )
# macros/utils/is_identifier.sql, the check every macro makes before it writes a name it was
# given into SQL: each value and whether it is one plain identifier.
IDENTIFIERS = [
    ("'a'", True),
    ("'_x9'", True),
    ("'Queue_Key_1'", True),
    ("'9a'", False),
    ("'a b'", False),
    ('"a\';--"', False),
    ("'a.b'", False),
    ("'a\\n'", False),  # a trailing newline (Jinja unescapes \n)
    ("'é'", False),
    ("''", False),
    ("none", False),
    ("5", False),
    ("['a']", False),
]


def _one_row_of_calls(macro: str, cases: list[tuple[str, bool]]) -> str:
    """A select of one column per case: `macro(value)` for each (value, expected) pair."""
    return "select " + ", ".join(
        f"{{{{ poisonwatch.{macro}({value}) }}}} as v{i}" for i, (value, _) in enumerate(cases)
    )


CASES["identifiers"] = _one_row_of_calls("is_identifier", IDENTIFIERS)
# Callers that now ask is_identifier: a schema.table of two identifiers passes, anything else
# (one part, three parts, a quote) is refused at compile time; so is a table alias with a quote.
CASES["target_ok"] = (
    "select length({{ receive_message_statement('d', 'q', 'h', 's', target_table='dbo.Parked') }})"
    " as n from values ('Db', 'Q', '6f9619ff-8b86-d011-b42d-00c04fc964ff', 7) as t(d, q, h, s)"
)
for name, table in (
    ("target_one", "Parked"),
    ("target_three", "a.b.c"),
    ("target_quote", "dbo.x'"),
):
    CASES[name] = (
        f"{{{{ receive_message_statement('d', 'q', 'h', 's', target_table=\"{table}\") }}}}"
    )
CASES["alias_quote"] = '{{ attempt_order("a\'--") }}'
# macros/utils/is_identifier_list.sql: several column names, each one plain identifier.
IDENTIFIER_LISTS = [
    ("['a', 'b_1']", True),
    ("['a']", True),
    ("[]", False),
    ("'a'", False),
    ("['a', 'b c']", False),
    ('["a\';--"]', False),
    ("none", False),
    ("{'a': 1}", False),
    ("[5]", False),
]
CASES["identifier_lists"] = _one_row_of_calls("is_identifier_list", IDENTIFIER_LISTS)
# Its callers refuse a key or order column that is not one, at compile time.
TABLE = "api.Relation.create(schema='s', identifier='t')"
CASES["segments_key_quote"] = (
    f"{{{{ rewrite_segments({TABLE}, 'select 1', 'p', ['consumer_id', \"s'--\"], 'is_success') }}}}"
)
CASES["segments_order_string"] = (
    f"{{{{ rewrite_segments({TABLE}, 'select 1', 'p', 'k', 'is_success', "
    "order_columns='attempted_at') }}"
)
CASES["carry_key_quote"] = (
    f"{{{{ carry_window_filter({TABLE}, 'p', none, [\"k'--\"], 'select 1') }}}}"
)

SCRIPT = """
import json, os
from dbt.cli.main import dbtRunner
from poisonwatch.config import home, project_root
from poisonwatch.warehouse.engine import connect
with connect("local") as e:
    e.spark.sql(
        "select * from values (1, 'x', null), (null, 'y', 3), (null, 'z', null), (4, 'w', 5) "
        "as t(a, b, c)"
    ).createOrReplaceTempView("pw_rows")
    root, store = project_root(), home()
    out = {}
    for name, inline in json.loads(os.environ["PW_CASES"]).items():
        res = dbtRunner().invoke([
            "compile", "--inline", inline, "--project-dir", str(root),
            "--profiles-dir", str(root), "--target", "local", "--quiet",
            "--target-path", str(store / "dbt_target"), "--log-path", str(store / "logs"),
        ])
        if not res.success:
            ex = res.exception
            chain = (ex, ex.__cause__, ex.__context__)
            out[name] = {"error": " | ".join(str(x) for x in chain if x)}
            continue
        sql = res.result.results[0].node.compiled_code
        cols, rows = e.query(sql)
        out[name] = {"columns": cols, "rows": sorted([list(r) for r in rows]), "sql": sql}
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def results(shared_store: SharedChild) -> dict[str, Any]:
    return shared_store.run(SCRIPT, {"PW_CASES": json.dumps(CASES)})


def test_not_null_columns_names_each_column_with_nulls_and_counts_them(
    results: dict[str, Any],
) -> None:
    assert results["nulls"]["columns"] == ["column_name", "null_row_count"]
    # a: 2 nulls, c: 2 nulls, b: none (not reported).
    assert results["nulls"]["rows"] == [["a", 2], ["c", 2]]


def test_not_null_columns_passes_clean_and_empty_tables(results: dict[str, Any]) -> None:
    assert results["clean"]["rows"] == []
    assert results["empty"]["rows"] == []


def test_accepted_values_columns_names_each_value_not_accepted_and_counts_its_rows(
    results: dict[str, Any],
) -> None:
    assert results["accepted"]["columns"] == ["column_name", "value", "row_count"]
    # b: z and w are not accepted; a: 1 and 4 are, its nulls pass (not_null tests them).
    assert results["accepted"]["rows"] == [["b", "w", 1], ["b", "z", 1]]
    assert results["accepted_clean"]["rows"] == []


def test_accepted_values_columns_quotes_values_it_compares_and_reports(
    results: dict[str, Any],
) -> None:
    assert results["accepted_quote_ok"]["rows"] == []
    assert results["accepted_quote_bad"]["rows"] == [["q", "it's;--", 1]]


def test_accepted_values_columns_refuses_what_is_not_a_mapping_of_names_to_strings(
    results: dict[str, Any],
) -> None:
    assert "non-empty list" in results["accepted_not_list"]["error"]
    assert "needs a mapping" in results["accepted_not_mapping"]["error"]
    assert "not a column name" in results["accepted_injected"]["error"]
    assert "accepted values are strings" in results["accepted_number"]["error"]


def test_not_null_columns_refuses_what_is_not_a_list_of_column_names(
    results: dict[str, Any],
) -> None:
    assert "not a column name" in results["injected"]["error"]
    assert "needs a list of column names" in results["string"]["error"]


def test_primary_key_reports_each_duplicated_key_with_its_row_count(
    results: dict[str, Any],
) -> None:
    assert results["pk_column_dup"]["columns"] == ["k", "row_count"]
    assert results["pk_column_dup"]["rows"] == [["a", 3]]
    assert results["pk_composite_dup"]["columns"] == ["k", "p", "row_count"]
    assert results["pk_composite_dup"]["rows"] == [["a", "p1", 2]]


def test_primary_key_reports_null_key_parts_unless_nullable(results: dict[str, Any]) -> None:
    assert results["pk_column_null"]["rows"] == [[None, 1]]
    # p may be null ('b', null passes); k may not.
    assert results["pk_nullable_part"]["rows"] == [[None, "p1", 1]]
    # A nullable part is grouped on as one value: two (null, p1) rows are one key twice.
    assert results["pk_nullable_dup"]["rows"] == [[None, "p1", 2]]


def test_primary_key_passes_unique_non_null_keys_and_empty_tables(
    results: dict[str, Any],
) -> None:
    assert results["pk_clean"]["rows"] == []
    assert results["pk_clean_composite"]["rows"] == []
    assert results["pk_empty_table"]["rows"] == []


def test_primary_key_refuses_what_is_not_one_key_of_column_names(
    results: dict[str, Any],
) -> None:
    assert "not both" in results["pk_both"]["error"]
    for name in ("pk_neither", "pk_string", "pk_empty_list"):
        assert "needs a column or a list of column names" in results[name]["error"], name
    for name in ("pk_injected", "pk_column_injected"):
        assert "not a column name" in results[name]["error"], name
    assert "not a key column" in results["pk_nullable_not_key"]["error"]
    assert "nullable_columns needs a list" in results["pk_nullable_string"]["error"]


def _assert_one_row_of_calls(result: dict[str, Any], cases: list[tuple[str, bool]]) -> None:
    """Each column of the row _one_row_of_calls built is its case's expected value."""
    (row,) = result["rows"]
    assert row == [want for _, want in cases], list(zip(cases, row, strict=True))


def test_is_identifier_accepts_plain_names_only(results: dict[str, Any]) -> None:
    _assert_one_row_of_calls(results["identifiers"], IDENTIFIERS)


def test_callers_refuse_names_is_identifier_refuses(results: dict[str, Any]) -> None:
    assert results["target_ok"]["rows"][0][0] > 0
    for name in ("target_one", "target_three", "target_quote"):
        assert "target_table must be schema.table" in results[name]["error"], results[name]
    assert "attempt_order expects a table alias" in results["alias_quote"]["error"]


def test_is_identifier_list_accepts_lists_of_plain_names_only(results: dict[str, Any]) -> None:
    _assert_one_row_of_calls(results["identifier_lists"], IDENTIFIER_LISTS)


def test_run_model_macros_refuse_column_names_that_are_not_identifiers(
    results: dict[str, Any],
) -> None:
    for name in ("segments_key_quote", "segments_order_string"):
        assert "rewrite_segments expects" in results[name]["error"], results[name]
    assert "carry_window_filter expects" in results["carry_key_quote"]["error"]


def test_relationships_reads_the_parent_in_the_childs_partitions_only(
    results: dict[str, Any],
) -> None:
    # d's parent row is in another partition: reported with partition_column, not without.
    assert results["rel_parts"]["rows"] == [["d"]]
    assert results["rel_plain"]["rows"] == []
    # A key missing from the parent is reported either way; nulls are not checked.
    assert results["rel_parts_missing"]["rows"] == [["d"], ["e"]]
    assert results["rel_plain_missing"]["rows"] == [["e"]]
    assert results["rel_parts_empty"]["rows"] == []
    assert "partition_column must be one column name" in results["rel_parts_injected"]["error"]
    # The parent is read through a semi-join on the partitions, not a list found beforehand.
    assert " in (select child.from_partition from child)" in results["rel_parts"]["sql"]
