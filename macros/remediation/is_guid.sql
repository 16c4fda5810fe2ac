{#- SQL boolean expression: `expression` is a GUID (8-4-4-4-12 hex digits, nothing else: the
    length check also refuses a trailing newline, which `$` would let through). -#}
{% macro is_guid(expression) -%}
    {{ return(adapter.dispatch('is_guid', 'poisonwatch')(expression)) }}
{%- endmacro %}

{% macro default__is_guid(expression) -%}
    coalesce(length({{ expression }}) = 36 and regexp_like({{ expression }}, '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$'), false)
{%- endmacro %}

{% macro spark__is_guid(expression) -%}
    coalesce(length({{ expression }}) = 36 and {{ expression }} rlike '^[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}$', false)
{%- endmacro %}
