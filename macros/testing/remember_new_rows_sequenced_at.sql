{#-
    For an incremental model whose new rows are attempts of the sequenced attempts' latest
    runs, each with its `sequenced_at` (the rollback and consumer failure runs, partitioned by
    attempt hour, not like the sequenced attempts): when the invocation already knows the
    sequenced attempts' newest `sequenced_at`, remembers it as this model's newest too, in the
    partitions of its new rows (one query of the cached new rows), so the model's scoped tests
    do not scan its own column. Only its new rows can hold that value; when none does, the
    tests check nothing, as the run wrote nothing newer.
    Nothing while parsing, when the value is not known, or when there are no new rows.
-#}
{% macro remember_new_rows_sequenced_at(new_rows_sql, partition_column) -%}
    {%- if new_rows_sql is not string or not poisonwatch.is_identifier(partition_column) -%}
        {{ exceptions.raise_compiler_error(
            "remember_new_rows_sequenced_at expects the new rows' query and one partition"
            ~ " column name, got: " ~ new_rows_sql ~ ", " ~ partition_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('remember_new_rows_sequenced_at', 'poisonwatch')(
        new_rows_sql, partition_column)) }}
{%- endmacro %}

{% macro default__remember_new_rows_sequenced_at(new_rows_sql, partition_column) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set upstream_latest = poisonwatch.latest_value(
        ref('int_receive_attempts_sequenced'), 'sequenced_at', 'message_partition', scan=false
    ) -%}
    {%- if upstream_latest is none or upstream_latest.value is none
        or upstream_latest.type != 'timestamp' -%}
        {{ return(none) }}
    {%- endif -%}
    {#- The 'v' prefix keeps the values text: agate would read a date-like text as a date. -#}
    {%- set values = run_query(
        "select distinct concat('v', cast(" ~ partition_column ~ " as string)) from ("
        ~ new_rows_sql ~ ") as new_rows where " ~ partition_column ~ " is not null"
    ).columns[0].values() -%}
    {%- set partitions = [] -%}
    {%- for value in values -%}
        {%- do partitions.append(value[1:]) -%}
    {%- endfor -%}
    {%- if partitions | length > 0 -%}
        {%- do poisonwatch.remember_latest_value(
            this, 'sequenced_at', 'timestamp', upstream_latest.value, partition_column,
            partitions,
        ) -%}
    {%- endif -%}
{%- endmacro %}
