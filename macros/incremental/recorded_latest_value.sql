{#-
    The newest value of `column` in an incremental model's table, as record_latest_value left
    it: the table properties `poisonwatch.latest.<column>.pending` (set before a run writes)
    and `poisonwatch.latest.<column>` (after), as 'yyyy-MM-dd HH:mm:ss[.ffffff]' text. Only
    when both hold the same timestamp; none when they differ (a run stopped between them), are
    missing (a table from before them, a rebuilt metastore) or hold other text. A metastore
    lookup, not a scan.
-#}
{% macro recorded_latest_value(relation, column) -%}
    {%- if relation is none or relation is string or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "recorded_latest_value expects a relation (this) and one column name, got: "
            ~ relation ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('recorded_latest_value', 'poisonwatch')(relation, column)) }}
{%- endmacro %}

{% macro default__recorded_latest_value(relation, column) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set properties = poisonwatch.table_properties(relation) -%}
    {%- set committed = properties.get('poisonwatch.latest.' ~ column) -%}
    {%- set pending = properties.get('poisonwatch.latest.' ~ column ~ '.pending') -%}
    {%- if committed is none or committed != pending or not modules.re.fullmatch(
        '\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?', committed) -%}
        {{ return(none) }}
    {%- endif -%}
    {{ return(committed) }}
{%- endmacro %}
