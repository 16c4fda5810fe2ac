"""Spark SQL that reads landing files, validates every record against the contract and types it.

Every statement is built from the contract (schemas.py) and from values that are quoted here:
paths and file names go through `sql_string` / `sql_path`, identifiers through `ident`. The
record-level pipeline is:

    one `select` per file (format-specific: jsonl, csv, parquet) giving the same columns:
      _fid, _rec, _blank, _text (original record), _pre_err, and one text column per contract
      field (`s_<name>`), plus `n_<name>` (a JSON object/array where text was expected)
    -> union all -> typed columns (`t_<name>`, null when the text does not parse)
    -> `_err`: the first failing field, as struct<field, reason>, or null.

The file a row came from is its `_fid` (`source_of` maps it back to the file's name where rows
are written): a file name on every row would make the chunk's cache larger and slower.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from poisonwatch.textsafe import sql_string
from poisonwatch.warehouse.schemas import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INT,
    STRING,
    TIMESTAMP,
    Column,
    Dataset,
)

# Low 33 bits of monotonically_increasing_id(): the row's index inside its Spark partition.
# Each file is read as exactly one partition (see `ingest`), so this is the line index.
ROW_INDEX_MASK = (1 << 33) - 1

_GUID = "[0-9A-F]{8}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{4}-[0-9A-F]{12}"
GUID_PATTERN = f"^([{{]{_GUID}[}}]|{_GUID})$"
# ISO-8601 / RFC 3339 with an offset; `T` or a space; 0-9 fraction digits (Java Instant,
# .NET ticks).
TIMESTAMP_PATTERN = (
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}([.][0-9]{1,9})?"
    "(Z|[+-][0-9]{2}(:?[0-9]{2})?)$"
)
LOCAL_TIMESTAMP_PATTERN = (
    "^[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}([.][0-9]*)?)?)?$"
)
INTEGER_PATTERN = "^[+-]?[0-9]+$"
# A finite decimal number, optionally with an exponent (no NaN, no Infinity).
NUMBER_PATTERN = "^[+-]?([0-9]+([.][0-9]*)?|[.][0-9]+)([eE][+-]?[0-9]+)?$"
DOUBLE_MAX = "1.7976931348623157E308"
BASE64_PATTERN = "^[A-Za-z0-9+/]*={0,2}$"
PREVIEW_CHARS = 40
CSV_OPTIONS = "map('mode', 'PERMISSIVE', 'quote', '\"', 'escape', '\"', "
CSV_OPTIONS += "'columnNameOfCorruptRecord', '_corrupt')"
BLANK_CHARS = " \t\r"


def ident(name: str) -> str:
    """A back-quoted Spark SQL identifier."""
    return "`" + name.replace("`", "``") + "`"


def glob_escape(path: str) -> str:
    """Hadoop treats * ? [ ] { } \\ in paths as a glob: escape them so the name is literal."""
    return re.sub(r"([\\*?\[\]{}])", r"\\\1", path)


def sql_path(fmt: str, path: str) -> str:
    """`fmt`.`path`: a direct query on one file, safe for any file name."""
    return f"{fmt}.{ident(glob_escape(path))}"


def text_col(name: str) -> str:
    return ident(f"s_{name}")


def nested_col(name: str) -> str:
    return ident(f"n_{name}")


def typed_col(name: str) -> str:
    return ident(f"t_{name}")


def is_free_text(column: Column) -> bool:
    return (
        column.type == STRING
        and not (column.enum or column.guid or column.base64)
        and not (column.json_object)
    )


# ---------------------------------------------------------------------------------------------
# Per-file sources: each yields the same columns, so the files of a dataset can be unioned.
# ---------------------------------------------------------------------------------------------


def _lines(fmt_path: str) -> str:
    return (
        f"select (monotonically_increasing_id() & {ROW_INDEX_MASK}) + 1 as _rec, value "
        f"from {fmt_path}"
    )


def _blank(expr: str) -> str:
    return f"(trim(BOTH {sql_string(BLANK_CHARS)} FROM {expr}) = '')"


# A whole line is blank when it holds only BLANK_CHARS: the same test as `_blank`, without
# copying every (long) line to trim it. `\z` (end of input), not `$`, which would also match
# before a final U+0085 / U+2028 / U+2029.
BLANK_LINE_PATTERN = "^[ \\t\\r]*\\z"


def _blank_line(expr: str) -> str:
    return f"({expr} rlike {sql_string(BLANK_LINE_PATTERN)})"


def source_of(sources: Sequence[str], fid: str = "_fid") -> str:
    """SQL for the file name of a stage row: `sources[fid]` (a constant array, indexed);
    `fid` is the row's `_fid` column, qualified where a join makes it ambiguous."""
    names = ", ".join(sql_string(s) for s in sources)
    return f"element_at(array({names}), {fid} + 1)"


def _struct_err(field: str | None, reason_sql: str) -> str:
    field_sql = "cast(null as string)" if field is None else sql_string(field)
    return f"named_struct('field', {field_sql}, 'reason', {reason_sql})"


NO_ERR = "cast(null as struct<field: string, reason: string>)"


def jsonl_source(fid: int, path: str, dataset: Dataset) -> str:
    """One `.jsonl` / `.jsonl.gz` file: one JSON object per line, parsed as VARIANT."""
    # One cast of the whole object to a struct of strings (numbers and booleans become their
    # text, objects and arrays their JSON); `n_<field>` tells a nested value from a string.
    # That JSON text starts with `{` or `[` itself, so only such values are looked up again.
    # A line that is valid JSON is an object exactly when its first non-blank character is
    # `{`; that check copies the line, so it runs only where the cast gave no struct.
    as_text = "struct<" + ", ".join(f"{ident(c.name)}: string" for c in dataset.columns) + ">"
    fields = []
    for c in dataset.columns:
        fields.append(f"_j.{ident(c.name)} as {text_col(c.name)}")
        if is_free_text(c):
            first = f"substr(_j.{ident(c.name)}, 1, 1)"
            path_lit = sql_string(f"$.{c.name}")
            fields.append(
                f"({first} in ('{{', '[') and "
                f"schema_of_variant(variant_get(_v, {path_lit})) rlike '^(OBJECT|ARRAY)') "
                f"as {nested_col(c.name)}"
            )
    pre_err = (
        f"case when _blank then {NO_ERR} "
        f"when _v is null then {_struct_err(None, sql_string('not valid JSON'))} "
        f"when _j is null and substr(ltrim(_text), 1, 1) <> '{{' then "
        f"{_struct_err(None, sql_string('not a JSON object (one object per line expected)'))} "
        f"else {NO_ERR} end"
    )
    return (
        f"select {fid} as _fid, _rec, _blank, _text, "
        f"{pre_err} as _pre_err, {', '.join(fields)} from ("
        f"select *, try_variant_get(_v, '$', {sql_string(as_text)}) as _j from ("
        f"select *, case when _blank then null else try_parse_json(_text) end as _v from ("
        f"select _rec, _text, {_blank_line('_text')} as _blank from ("
        f"select _rec, case when _rec = 1 then regexp_replace(value, '^\\uFEFF', '') "
        f"else value end as _text from ({_lines(sql_path('text', path))})))))"
    )


def csv_source(
    fid: int,
    path: str,
    dataset: Dataset,
    header: Sequence[str],
    open_last_line: bool = False,
) -> str:
    """One `.csv` file with a header row (already checked); one record per line, RFC 4180 quotes.

    `open_last_line`: the file does not end with a line end, so its last record may have been
    cut mid-way (a copy still being written, a transfer cut short): that record is rejected, and
    the complete file landed later adds it (the others count once, by their natural key).
    """
    positions = {name.strip().lower(): i for i, name in enumerate(header)}
    schema = ", ".join(f"c{i} string" for i in range(len(header))) + ", _corrupt string"
    fields = []
    for c in dataset.columns:
        pos = positions.get(c.name.lower())
        value = f"_p.c{pos}" if pos is not None else "cast(null as string)"
        fields.append(f"{value} as {text_col(c.name)}")
        if is_free_text(c):
            fields.append(f"false as {nested_col(c.name)}")
    quotes = "(length(_text) - length(replace(_text, '\"', ''))) % 2 = 1"
    unbalanced = sql_string("unbalanced quotes (CSV records must be on one line each)")
    wrong = sql_string(f"wrong number of fields (the header has {len(header)})")
    cut = sql_string(
        "last record has no line end: the file may have been cut mid-record "
        "(land the complete file again)"
    )
    last = "_rec = max(_rec) over ()" if open_last_line else "false"
    pre_err = (
        f"case when _blank then {NO_ERR} "
        f"when {last} then {_struct_err(None, cut)} "
        f"when {quotes} then {_struct_err(None, unbalanced)} "
        f"when _p._corrupt is not null then {_struct_err(None, wrong)} "
        f"else {NO_ERR} end"
    )
    return (
        f"select {fid} as _fid, _rec, _blank, _text, "
        f"{pre_err} as _pre_err, {', '.join(fields)} from ("
        f"select *, case when _blank then null else "
        f"from_csv(_text, {sql_string(schema)}, {CSV_OPTIONS}) end as _p from ("
        f"select _rec, value as _text, {_blank_line('value')} as _blank from "
        f"({_lines(sql_path('text', path))}) where _rec > 1))"
    )


_INTEGER_TYPES = ("tinyint", "smallint", "int", "bigint")


def parquet_text_expr(column: Column, name: str, spark_type: str) -> str | None:
    """How a Parquet column of `spark_type` becomes contract text; None when it cannot."""
    col = ident(name)
    t = spark_type.lower()
    if t == "void":
        return "cast(null as string)"
    if t == "string":
        return col
    if column.type == TIMESTAMP:
        if t in ("timestamp", "timestamp_ntz"):
            # Session time zone is UTC; TIMESTAMP_NTZ is read as UTC (the contract's zone).
            return f"date_format({col}, \"yyyy-MM-dd'T'HH:mm:ss.SSSSSS'Z'\")"
        return None
    if column.type in (INT, BIGINT):
        integral = t in _INTEGER_TYPES or re.fullmatch(r"decimal\(\d+,\s*0\)", t)
        return f"cast({col} as string)" if integral else None
    if column.type == BOOLEAN:
        return f"cast({col} as string)" if t == "boolean" else None
    if column.type == DOUBLE:
        numeric = t in _INTEGER_TYPES or t.startswith("decimal") or t in ("double", "float")
        return f"cast({col} as string)" if numeric else None
    # STRING targets
    if column.base64 and t == "binary":
        return f"base64({col})"
    if column.json_object and (t.startswith("struct") or t.startswith("map")):
        return f"to_json({col})"
    if t in _INTEGER_TYPES or t.startswith("decimal") or t in ("boolean", "double", "float"):
        return (
            None
            if (column.guid or column.base64 or column.json_object)
            else (f"cast({col} as string)")
        )
    return None


def parquet_source(fid: int, path: str, dataset: Dataset, file_columns: dict[str, str]) -> str:
    """One `.parquet` file; `file_columns` maps the file's column names to Spark types.

    The caller has checked (`parquet_problems`) that every required column is present and
    every column type converts.
    """
    by_lower = {name.lower(): name for name in file_columns}
    fields = []
    for c in dataset.columns:
        name = by_lower.get(c.name.lower())
        expr = "cast(null as string)"
        if name is not None:
            expr = parquet_text_expr(c, name, file_columns[name]) or expr
        fields.append(f"{expr} as {text_col(c.name)}")
        if is_free_text(c):
            fields.append(f"false as {nested_col(c.name)}")
    row = ", ".join(ident(n) for n in file_columns)
    return (
        f"select {fid} as _fid, "
        f"_metadata.row_index + 1 as _rec, false as _blank, to_json(struct({row})) as _text, "
        f"{NO_ERR} as _pre_err, {', '.join(fields)} from {sql_path('parquet', path)}"
    )


def parquet_problems(dataset: Dataset, file_columns: dict[str, str]) -> str | None:
    """Why a Parquet file cannot be loaded as `dataset` (missing or unconvertible columns)."""
    by_lower = {name.lower(): name for name in file_columns}
    missing = [c.name for c in dataset.columns if c.required and c.name.lower() not in by_lower]
    if missing:
        return f"missing required column(s): {', '.join(missing)}"
    wrong = []
    for c in dataset.columns:
        name = by_lower.get(c.name.lower())
        if name is not None and parquet_text_expr(c, name, file_columns[name]) is None:
            wrong.append(f"{c.name} is {file_columns[name]}, expected {c.type}")
        if name is not None and c.required and file_columns[name].lower() == "void":
            wrong.append(f"{c.name} is always null")
    return f"column type(s) not accepted: {'; '.join(wrong)}" if wrong else None


# ---------------------------------------------------------------------------------------------
# Validation and typing, over the union of the files of one dataset.
# ---------------------------------------------------------------------------------------------


def _preview(value_sql: str) -> str:
    """` ('value…')`: the offending value, short, quotes doubled."""
    short = f"replace(substr({value_sql}, 1, {PREVIEW_CHARS}), '''', '''''')"
    more = f"if(length({value_sql}) > {PREVIEW_CHARS}, '…', '')"
    return f"concat(' (''', {short}, {more}, ''')')"


def _value(c: Column) -> str:
    """Text of the field with empty / all-blank text as null."""
    s = text_col(c.name)
    return f"case when {_blank(s)} then null else {s} end"


def typed_expr(c: Column) -> str:
    """The typed value of a present field, null when it does not parse."""
    v = f"v_{c.name}"
    vv = ident(v)
    trimmed = f"trim({vv})"
    if c.type == TIMESTAMP:
        u = f"upper({trimmed})"
        pattern = sql_string(TIMESTAMP_PATTERN)
        return f"case when {u} rlike {pattern} then try_cast({u} as timestamp) end"
    if c.type in (INT, BIGINT):
        return (
            f"case when {trimmed} rlike {sql_string(INTEGER_PATTERN)} "
            f"then try_cast({trimmed} as {c.type}) end"
        )
    if c.type == DOUBLE:
        number = f"try_cast({trimmed} as double)"
        return (
            f"case when {trimmed} rlike {sql_string(NUMBER_PATTERN)} "
            f"and abs({number}) <= {DOUBLE_MAX} then {number} end"
        )
    if c.type == BOOLEAN:
        return (
            f"case lower({trimmed}) when 'true' then true when '1' then true "
            f"when 'false' then false when '0' then false end"
        )
    if c.enum:
        values = ", ".join(sql_string(x) for x in c.enum)
        return f"case when {trimmed} in ({values}) then {trimmed} end"
    if c.guid:
        # Braces, when present, are the first and last character (the pattern says so).
        u = f"upper({trimmed})"
        return (
            f"case when {u} rlike {sql_string(GUID_PATTERN)} "
            f"then if(startswith({u}, '{{'), substr({u}, 2, 36), {u}) end"
        )
    if c.base64:
        return (
            f"case when {trimmed} rlike {sql_string(BASE64_PATTERN)} "
            f"and length({trimmed}) % 4 = 0 then {trimmed} end"
        )
    if c.json_object:
        return (
            f"case when substr(ltrim({vv}), 1, 1) = '{{' and try_parse_json({vv}) is not null "
            f"then {vv} end"
        )
    return f"case when {nested_col(c.name)} then null else {vv} end"


def invalid_reason(c: Column) -> str:
    """SQL for the reason a present value of `c` did not parse (value preview included)."""
    v = ident(f"v_{c.name}")
    preview = _preview(v)
    if c.type == TIMESTAMP:
        u = f"upper(trim({v}))"
        return (
            f"concat(case when {u} rlike {sql_string(LOCAL_TIMESTAMP_PATTERN)} then "
            f"'timestamp without a UTC offset (add Z or ±hh:mm)' "
            f"when {u} rlike {sql_string(TIMESTAMP_PATTERN)} then 'not a valid date/time' "
            f"else 'not an ISO-8601 timestamp' end, {preview})"
        )
    if c.type in (INT, BIGINT):
        return (
            f"concat(case when trim({v}) rlike {sql_string(INTEGER_PATTERN)} then "
            f"{sql_string('integer out of range for ' + c.type)} "
            f"else 'not an integer' end, {preview})"
        )
    if c.type == DOUBLE:
        return (
            f"concat(case when trim({v}) rlike {sql_string(NUMBER_PATTERN)} then "
            f"'number out of range for double' else 'not a number' end, {preview})"
        )
    if c.type == BOOLEAN:
        return f"concat('not a boolean (true/false/1/0)', {preview})"
    if c.enum:
        return f"concat({sql_string('not one of ' + ', '.join(c.enum))}, {preview})"
    if c.guid:
        return f"concat('not a GUID', {preview})"
    if c.base64:
        return f"concat('not base64', {preview})"
    if c.json_object:
        return f"concat('not a JSON object', {preview})"
    return f"concat('a JSON object or array where text is expected', {preview})"


def error_expr(dataset: Dataset) -> str:
    """The first failure of a record, in contract column order, as struct<field, reason>."""
    whens = ["when _blank then null", "when _pre_err is not null then _pre_err"]
    for c in dataset.columns:
        v = ident(f"v_{c.name}")
        if c.required:
            missing = _struct_err(
                c.name, sql_string(f"{c.name}: required field is missing or empty")
            )
            whens.append(f"when {v} is null then {missing}")
        reason = f"concat({sql_string(c.name + ': ')}, {invalid_reason(c)})"
        whens.append(
            f"when {v} is not null and {typed_col(c.name)} is null then "
            f"{_struct_err(c.name, reason)}"
        )
    return f"case {' '.join(whens)} else null end"


def stage_query(dataset: Dataset, sources: Sequence[str]) -> str:
    """Union of the file sources, typed and validated: one row per line / row of every file."""
    union = "\nunion all\n".join(f"({s})" for s in sources)
    values = ", ".join(f"{_value(c)} as {ident('v_' + c.name)}" for c in dataset.columns)
    nested = ", ".join(nested_col(c.name) for c in dataset.columns if is_free_text(c))
    typed = ", ".join(f"{typed_expr(c)} as {typed_col(c.name)}" for c in dataset.columns)
    keep = "_fid, _rec, _blank, _text, _pre_err"
    typed_names = ", ".join(typed_col(c.name) for c in dataset.columns)
    return (
        f"select _fid, _rec, _blank, {typed_names}, "
        f"_err, case when _err is not null then _text end as _text from ("
        f"select *, {error_expr(dataset)} as _err from ("
        f"select *, {typed} from ("
        f"select {keep}{', ' + nested if nested else ''}, {values} from (\n{union}\n))))"
    )


# ---------------------------------------------------------------------------------------------
# Natural keys: a record that arrives in several files (overlapping exports) counts once.
# ---------------------------------------------------------------------------------------------

# dataset -> (time column that bounds the search in the raw table, key columns). README
# "Landing contract" states these keys. Service Broker attempts use `attempt_id` alone when the
# application gives one.
DEDUP_KEYS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ssb_receive_attempts": (
        "attempted_at",
        (
            "server_name",
            "database_name",
            "queue_name",
            "conversation_handle",
            "message_sequence_number",
            "attempted_at",
            "outcome",
            "error_number",
        ),
    ),
    "jms_receive_attempts": (
        "attempted_at",
        (
            "broker_name",
            "queue_name",
            "message_id",
            "consumer_id",
            "server_name",
            "delivery_count",
            "attempted_at",
            "outcome",
        ),
    ),
    "ssb_queue_snapshots": (
        "snapshot_at",
        (
            "snapshot_at",
            "server_name",
            "database_name",
            "queue_name",
            "conversation_handle",
            "message_sequence_number",
        ),
    ),
    # orig_queue too: the copies of one multicast message in a DLQ share their message id.
    "jms_queue_snapshots": (
        "snapshot_at",
        ("snapshot_at", "broker_name", "queue_name", "message_id", "orig_queue"),
    ),
}


def dedup_key(dataset: Dataset, column_sql: dict[str, str]) -> str | None:
    """SQL for the natural key of a record as one string (None: the dataset has no key).

    `column_sql` maps contract column names to their SQL (typed stage column or raw column).
    Timestamps enter as microseconds (to_json would keep only milliseconds).
    """
    spec = DEDUP_KEYS.get(dataset.name)
    if spec is None:
        return None
    types = {c.name: c.type for c in dataset.columns}

    def part(name: str) -> str:
        sql = column_sql[name]
        return f"unix_micros({sql})" if types[name] == TIMESTAMP else sql

    fields = ", ".join(f"{sql_string(n)}, {part(n)}" for n in spec[1])
    key = f"to_json(named_struct({fields}))"
    if dataset.name == "ssb_receive_attempts":
        attempt_id = column_sql["attempt_id"]
        return (
            f"case when {attempt_id} is not null "
            f"then to_json(named_struct('attempt_id', {attempt_id})) else {key} end"
        )
    return key


def duplicates_query(dataset: Dataset, stage: str, raw_table: str, low: str, high: str) -> str:
    """(_fid, _rec) of the valid stage records whose key is already in `raw_table` (rows with
    time between the `low` and `high` literals: the new records' range, so only that range of
    history is read) or earlier in the stage (file order, then record order)."""
    time_column = DEDUP_KEYS[dataset.name][0]
    stage_key = dedup_key(dataset, {c.name: typed_col(c.name) for c in dataset.columns})
    raw_key = dedup_key(dataset, {c.name: ident(c.name) for c in dataset.columns})
    return (
        f"select s._fid, s._rec from ("
        f"select _fid, _rec, _k, row_number() over (partition by _k order by _fid, _rec) as _n "
        f"from (select _fid, _rec, {stage_key} as _k from {stage} "
        f"where not _blank and _err is null)) s "
        f"left join (select distinct {raw_key} as _k from {raw_table} "
        f"where {ident(time_column)} between {low} and {high}) e on s._k = e._k "
        f"where s._n > 1 or e._k is not null"
    )
