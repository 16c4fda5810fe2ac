{#-
    A post-hook for a model that takes the upstream partitions changed since its last run
    (changed_partitions_filter): records on its table, after a successful run, the newest
    `column` value of the upstream it has now taken in (table property
    `poisonwatch.watermark.<column>`, read back by recorded_watermark). Every upstream
    partition at or below that value has been read, so the next run starts after it without
    scanning its own table for the newest value. Nothing when the upstream holds no value.
    The upstream's newest value is the invocation's cached latest_scope_value: the upstream
    was built before this model ran and nothing rebuilds it in the same run.
-#}
{% macro record_watermark(upstream, column) -%}
    {%- if upstream is none or upstream is string or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "record_watermark expects a relation and one column name, got: "
            ~ upstream ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('record_watermark', 'poisonwatch')(upstream, column)) }}
{%- endmacro %}

{% macro default__record_watermark(upstream, column) -%}
    {%- if not execute -%}
        {{ return('') }}
    {%- endif -%}
    {%- set newest = poisonwatch.latest_scope_value(upstream, column) or '' -%}
    {#- latest_scope_value writes `cast('<value>' as timestamp)`; only a timestamp is kept. -#}
    {%- set match = modules.re.match(
        "^cast\\('(\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?)' as timestamp\\)$",
        newest
    ) -%}
    {%- if not match -%}
        {{ return('') }}
    {%- endif -%}
    alter table {{ this }} set tblproperties (
        {{ poisonwatch.string_literal_list(['poisonwatch.watermark.' ~ column]) }}
        = {{ poisonwatch.string_literal_list([match.group(1)]) }}
    )
{%- endmacro %}
