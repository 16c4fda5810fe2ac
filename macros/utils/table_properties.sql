{#-
    The table properties of a relation as a dict of text, from one `show tblproperties` (a
    metastore lookup, not a scan). Empty while parsing. The watermark macros read theirs
    with it (recorded_batch_watermark).
-#}
{% macro table_properties(relation) -%}
    {%- if relation is none or relation is string -%}
        {{ exceptions.raise_compiler_error(
            "table_properties expects a relation, got: " ~ relation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('table_properties', 'poisonwatch')(relation)) }}
{%- endmacro %}

{% macro default__table_properties(relation) -%}
    {%- set properties = {} -%}
    {%- if execute -%}
        {%- for row in run_query('show tblproperties ' ~ relation).rows -%}
            {%- do properties.update({row[0] | string: row[row | length - 1] | string}) -%}
        {%- endfor -%}
    {%- endif -%}
    {{ return(properties) }}
{%- endmacro %}
