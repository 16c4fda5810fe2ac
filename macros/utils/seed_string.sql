{#-
    A text cell of a policy seed, trimmed, with blanks as null. dbt-spark's session method
    loads a blank CSV cell of a string column as the text 'None', so that is null too.
-#}
{% macro seed_string(column) -%}
    {{ return(adapter.dispatch('seed_string', 'poisonwatch')(column)) }}
{%- endmacro %}

{% macro default__seed_string(column) -%}
    nullif(nullif(trim(cast({{ column }} as string)), ''), 'None')
{%- endmacro %}
