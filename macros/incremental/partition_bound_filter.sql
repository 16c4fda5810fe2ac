{#-
    `where <column> <operator> '<bound>'` for a partition column holding sortable text (a
    time_bucket); `where false` when there is no bound (nothing new: read nothing).
-#}
{% macro partition_bound_filter(column, operator, bound) -%}
    {%- if operator not in ['<', '<=', '>', '>=', '='] -%}
        {{ exceptions.raise_compiler_error(
            "partition_bound_filter: operator must be one of < <= > >= =, got: " ~ operator) }}
    {%- endif -%}
    {{ return(adapter.dispatch('partition_bound_filter', 'poisonwatch')(column, operator, bound)) }}
{%- endmacro %}

{% macro default__partition_bound_filter(column, operator, bound) -%}
    {%- if bound -%}
        where {{ column }} {{ operator }} '{{ bound | string | replace("\\", "\\\\") | replace("'", "\\'") }}'
    {%- else -%}
        where false
    {%- endif -%}
{%- endmacro %}
