{#-
    The distinct non-null values of `partition_column` in the rows `rows_sql` selects, as
    text, sorted: the partitions those rows are in, for a model that tells the invocation
    which partitions it writes (remember_latest_value). One query. The values are read with a
    'v' prefix, removed here: agate would read a date-like text (an hour partition) as a date.
    [] while parsing.
-#}
{% macro distinct_partitions(rows_sql, partition_column) -%}
    {%- if rows_sql is not string or not poisonwatch.is_identifier(partition_column) -%}
        {{ exceptions.raise_compiler_error(
            "distinct_partitions expects a query and one partition column name, got: "
            ~ rows_sql ~ ", " ~ partition_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('distinct_partitions', 'poisonwatch')(
        rows_sql, partition_column)) }}
{%- endmacro %}

{% macro default__distinct_partitions(rows_sql, partition_column) -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set values = run_query(
        "select distinct concat('v', cast(" ~ partition_column ~ " as string)) from ("
        ~ rows_sql ~ ") as partitioned_rows where " ~ partition_column ~ " is not null"
    ).columns[0].values() -%}
    {%- set partitions = [] -%}
    {%- for text in values -%}
        {%- do partitions.append(text[1:]) -%}
    {%- endfor -%}
    {{ return(partitions | sort) }}
{%- endmacro %}
