{#-
    True when `value` is a string holding one plain SQL identifier ([A-Za-z_][A-Za-z0-9_]*):
    safe to write unquoted into SQL as a column name, a table alias or one part of a table
    name. The one check every macro and generic test makes before it puts a name it was given
    into SQL (re.fullmatch: a trailing newline does not pass). A compile-time helper, the same
    on every adapter, so no dispatch.
-#}
{% macro is_identifier(value) -%}
    {{ return(value is string and modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_]*', value) is not none) }}
{%- endmacro %}
