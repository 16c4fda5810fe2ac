{#-
    dbt's not_null for several required columns of one model in one scan: returns one row per
    listed column that holds nulls (column_name, null_row_count); the failure count is the
    number of null values. One node and one read of the table instead of one per column: on a
    build every test node costs a query, and a table that grows with history is read once.
    Keys have their own test, primary_key (unique and not null in one scan).
-#}
{% test not_null_columns(model, column_names) %}
    {{ config(fail_calc='coalesce(sum(null_row_count), 0)') }}
    {%- if column_names is string or column_names | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "not_null_columns needs a list of column names, got: " ~ column_names) }}
    {%- endif -%}
    {%- for column in column_names -%}
        {%- if not poisonwatch.is_identifier(column) -%}
            {{ exceptions.raise_compiler_error(
                "not_null_columns: not a column name: " ~ column) }}
        {%- endif -%}
    {%- endfor %}
    with null_counts as (
        select
            {%- for column in column_names %}
            sum(case when {{ column }} is null then 1 else 0 end) as nulls_{{ loop.index }}
            {%- if not loop.last %},{% endif %}
            {%- endfor %}
        from {{ model }}
    )
    {%- for column in column_names %}

    select
        '{{ column }}' as column_name,
        nulls_{{ loop.index }} as null_row_count
    from null_counts
    where nulls_{{ loop.index }} > 0
    {%- if not loop.last %}

    union all
    {%- endif %}
    {%- endfor %}
{% endtest %}
