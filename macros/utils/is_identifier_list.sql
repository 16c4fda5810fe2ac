{#-
    True when `value` is a non-empty list (not a string) of plain SQL identifiers, each passing
    is_identifier: the check for a macro given several column names (key columns, order
    columns) before it writes them into SQL. A compile-time helper, the same on every adapter,
    so no dispatch.
-#}
{% macro is_identifier_list(value) -%}
    {%- if value is string or value is mapping or value is not sequence or value | length == 0 -%}
        {{ return(false) }}
    {%- endif -%}
    {%- set state = namespace(ok=true) -%}
    {%- for item in value if state.ok -%}
        {%- set state.ok = poisonwatch.is_identifier(item) -%}
    {%- endfor -%}
    {{ return(state.ok) }}
{%- endmacro %}
