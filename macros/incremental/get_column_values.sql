{#-
    The distinct values of one column of a relation, sorted, as a list (dbt-utils'
    get_column_values). Incremental models read their own state with it at run time: the
    batches already processed, the partitions to recompute. Empty during parsing.
-#}
{% macro get_column_values(table, column, where=none) -%}
    {%- if table is none or column is none or column is not string -%}
        {{ exceptions.raise_compiler_error(
            "get_column_values expects a relation and a column name, got: "
            ~ table ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('get_column_values', 'poisonwatch')(table, column, where)) }}
{%- endmacro %}

{% macro default__get_column_values(table, column, where) -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set query -%}
        select distinct {{ column }} as value
        from {{ table }}
        where {{ column }} is not null
        {%- if where %} and ({{ where }}){% endif %}
        order by 1
    {%- endset -%}
    {%- set result = run_query(query) -%}
    {{ return(result.columns[0].values() | list) }}
{%- endmacro %}
