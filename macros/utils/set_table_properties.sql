{#-
    `alter table <relation> set tblproperties ('<key>' = '<value>', ...)` for a dict of text,
    keys and values quoted as string literals, in the dict's order: the statement the
    batch watermark hooks write (record_batch_watermark).
-#}
{% macro set_table_properties(relation, properties) -%}
    {%- if relation is none or relation is string or properties is not mapping
        or properties | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "set_table_properties expects a relation and a non-empty dict, got: "
            ~ relation ~ ", " ~ properties) }}
    {%- endif -%}
    {{ return(adapter.dispatch('set_table_properties', 'poisonwatch')(relation, properties)) }}
{%- endmacro %}

{% macro default__set_table_properties(relation, properties) -%}
    {%- set assignments = [] -%}
    {%- for key, value in properties.items() -%}
        {%- do assignments.append(
            poisonwatch.string_literal_list([key]) ~ ' = '
            ~ poisonwatch.string_literal_list([value])
        ) -%}
    {%- endfor -%}
    {{ return('alter table ' ~ relation ~ ' set tblproperties (' ~ assignments | join(', ') ~ ')') }}
{%- endmacro %}
