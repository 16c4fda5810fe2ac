{#-
    How many distinct reporting servers trip a consumer setting (seed 002): 2 in mode MANY,
    1 in mode ANY (and any other value).
-#}
{% macro breaker_reports_needed(breaker_mode) -%}
    {%- if breaker_mode is not string or breaker_mode | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "breaker_reports_needed expects a column name or SQL expression, got: "
            ~ breaker_mode) }}
    {%- endif -%}
    {{ return(adapter.dispatch('breaker_reports_needed', 'poisonwatch')(breaker_mode)) }}
{%- endmacro %}

{% macro default__breaker_reports_needed(breaker_mode) -%}
    case when {{ breaker_mode }} = 'MANY' then 2 else 1 end
{%- endmacro %}
