{#-
    The watermark an incremental model recorded on its own table after its last successful
    run (table property `poisonwatch.watermark.<column>`, written by record_watermark): the
    newest upstream `column` value it has taken in, as 'yyyy-MM-dd HH:mm:ss[.ffffff]' text.
    none when there is none or it is not a timestamp (a table created before the property
    existed, a full refresh not finished, a rebuilt metastore): the caller then reads the
    newest value from the rows themselves. A metastore lookup, not a scan of the table.
-#}
{% macro recorded_watermark(relation, column) -%}
    {%- if relation is none or relation is string or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "recorded_watermark expects a relation and one column name, got: "
            ~ relation ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('recorded_watermark', 'poisonwatch')(relation, column)) }}
{%- endmacro %}

{% macro default__recorded_watermark(relation, column) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {#- Spark answers a missing key with a sentence in the value column, which the pattern
        below rejects like any other value that is not a timestamp. -#}
    {%- set rows = run_query(
        'show tblproperties ' ~ relation
        ~ ' (' ~ poisonwatch.string_literal_list(['poisonwatch.watermark.' ~ column]) ~ ')'
    ).rows -%}
    {%- set value = (rows[0][rows[0] | length - 1] | string) if rows | length > 0 else '' -%}
    {%- if modules.re.match('^\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?$', value) -%}
        {{ return(value) }}
    {%- endif -%}
    {{ return(none) }}
{%- endmacro %}
