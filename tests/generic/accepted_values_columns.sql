{#-
    dbt's accepted_values for several enum columns of one model in one scan: `values` maps
    each column name to its accepted values (strings). Returns one row per column and value
    that is not accepted (column_name, value, row_count); the failure count is the number of
    rows holding one. Nulls pass, as in accepted_values (not_null tests them). One node and
    one read of the table instead of one per column: on a build every test node costs a
    Spark job, and a table that grows with history is read once. A column with a single enum
    keeps dbt's accepted_values.
-#}
{% test accepted_values_columns(model, values) %}
    {{ config(fail_calc='coalesce(sum(row_count), 0)') }}
    {%- if values is not mapping or values | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "accepted_values_columns needs a mapping of column name to accepted values, got: "
            ~ values) }}
    {%- endif -%}
    {%- set checks = [] -%}
    {%- for column, accepted in values | dictsort -%}
        {%- if not poisonwatch.is_identifier(column) -%}
            {{ exceptions.raise_compiler_error(
                "accepted_values_columns: not a column name: " ~ column) }}
        {%- endif -%}
        {%- if accepted is string or accepted is mapping or accepted is not iterable
            or accepted | length == 0 -%}
            {{ exceptions.raise_compiler_error(
                "accepted_values_columns: " ~ column
                ~ " needs a non-empty list of accepted values, got: " ~ accepted) }}
        {%- endif -%}
        {%- for value in accepted -%}
            {%- if value is not string -%}
                {{ exceptions.raise_compiler_error(
                    "accepted_values_columns: " ~ column
                    ~ ": accepted values are strings, got: " ~ value) }}
            {%- endif -%}
        {%- endfor -%}
        {%- do checks.append((
            column,
            'cast(' ~ column ~ ' as string) not in ('
            ~ poisonwatch.string_literal_list(accepted) ~ ')'
        )) -%}
    {%- endfor %}
    {#- The where clause keeps only rows with some value not accepted (few or none), so the
        row-per-column stack runs on those rows, not on the table. #}
    with values_not_accepted as (
        select
            stack(
                {{ checks | length }},
                {%- for column, condition in checks %}
                '{{ column }}', case when {{ condition }} then cast({{ column }} as string) end
                {%- if not loop.last %},{% endif %}
                {%- endfor %}
            ) as (column_name, value)
        from {{ model }}
        where
            {%- for _, condition in checks %}
            {% if not loop.first %}or {% endif %}{{ condition }}
            {%- endfor %}
    )

    select
        column_name,
        value,
        count(*) as row_count
    from values_not_accepted
    where value is not null
    group by column_name, value
{% endtest %}
