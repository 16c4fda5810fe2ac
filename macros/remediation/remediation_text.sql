{#- A constant text as a SQL string literal of the warehouse (Spark: backslash escapes). -#}
{% macro remediation_text(text) -%}
    {{ return(adapter.dispatch('remediation_text', 'poisonwatch')(text)) }}
{%- endmacro %}

{% macro default__remediation_text(text) -%}
    '{{ text | string | replace("'", "''") }}'
{%- endmacro %}

{% macro spark__remediation_text(text) -%}
    '{{ text | string | replace("\\", "\\\\") | replace("'", "\\'") | replace("\n", "\\n") | replace("\r", "\\r") }}'
{%- endmacro %}
