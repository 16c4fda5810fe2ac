{#-
    A model's key, unique and not null, in one scan: returns one row per key value that
    occurs more than once or has a null part (the key columns and row_count). One node and
    one read of the table instead of `unique` + `not_null` (or unique_combination_of_columns
    + not_null_columns): on a build every test node costs a Spark job, and a table that grows
    with history is read once. On a column (column_name) or on the model with `column_names`,
    a list: the columns of a composite key. `nullable_columns`, a subset of column_names, are
    key parts that may be null (a subject column of the other broker kind): grouped on, a null
    as one value, but not required.
-#}
{% test primary_key(model, column_name=none, column_names=none, nullable_columns=none) %}
    {%- if column_name is not none and column_names is not none -%}
        {{ exceptions.raise_compiler_error(
            "primary_key: on a column or with column_names, not both") }}
    {%- endif -%}
    {%- set key = [column_name] if column_name is not none else column_names -%}
    {%- if key is none or key is string or key is mapping or key is not iterable
        or key | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "primary_key needs a column or a list of column names, got: " ~ key) }}
    {%- endif -%}
    {%- for column in key -%}
        {%- if not poisonwatch.is_identifier(column) -%}
            {{ exceptions.raise_compiler_error("primary_key: not a column name: " ~ column) }}
        {%- endif -%}
    {%- endfor -%}
    {%- set nullable = nullable_columns if nullable_columns is not none else [] -%}
    {%- if nullable is string or nullable is mapping or nullable is not iterable -%}
        {{ exceptions.raise_compiler_error(
            "primary_key: nullable_columns needs a list of key columns, got: " ~ nullable) }}
    {%- endif -%}
    {%- for column in nullable -%}
        {%- if column not in key -%}
            {{ exceptions.raise_compiler_error(
                "primary_key: nullable_columns: not a key column: " ~ column) }}
        {%- endif -%}
    {%- endfor -%}
    {%- set required = key | reject('in', nullable) | list %}
    select
        {%- for column in key %}
        {{ column }},
        {%- endfor %}
        count(*) as row_count
    from {{ model }}
    group by {{ key | join(', ') }}
    having
        count(*) > 1
        {%- for column in required %}
        or {{ column }} is null
        {%- endfor %}
{% endtest %}
