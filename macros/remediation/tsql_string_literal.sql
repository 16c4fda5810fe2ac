{#- SQL expression: the value of `expression` as a T-SQL N'...' literal, quotes doubled, cut to
    `max_length` characters; the text NULL when the value is null. -#}
{% macro tsql_string_literal(expression, max_length=none) -%}
    {% if max_length is not none and (max_length is not number or max_length < 1) %}
        {{ exceptions.raise_compiler_error("tsql_string_literal: max_length must be a positive integer, got " ~ max_length) }}
    {% endif %}
    {{ return(adapter.dispatch('tsql_string_literal', 'poisonwatch')(expression, max_length)) }}
{%- endmacro %}

{% macro default__tsql_string_literal(expression, max_length) -%}
    {%- set value = "cast(" ~ expression ~ " as " ~ dbt.type_string() ~ ")" -%}
    {%- if max_length is not none %}{% set value = "substring(" ~ value ~ ", 1, " ~ max_length ~ ")" %}{% endif -%}
    coalesce('N''' || replace({{ value }}, '''', '''''') || '''', 'NULL')
{%- endmacro %}

{% macro spark__tsql_string_literal(expression, max_length) -%}
    {%- set value = "cast(" ~ expression ~ " as string)" -%}
    {%- if max_length is not none %}{% set value = "substr(" ~ value ~ ", 1, " ~ max_length ~ ")" %}{% endif -%}
    coalesce(concat('N', chr(39), replace({{ value }}, chr(39), concat(chr(39), chr(39))), chr(39)), 'NULL')
{%- endmacro %}
