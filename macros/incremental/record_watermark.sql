{#-
    A post-hook for a model that takes the upstream partitions changed since its last run
    (changed_partitions_filter): records on its table, after a successful run, the newest
    `column` value of the upstream it has now taken in (table property
    `poisonwatch.watermark.<column>`, read back by recorded_watermark). Every upstream
    partition at or below that value has been read, so the next run starts after it without
    scanning its own table for the newest value. Nothing when the upstream holds no value.
    The upstream's newest value is the invocation's cached latest_value (the one the scoped
    data tests compare with): the upstream was built before this model ran and nothing
    rebuilds it in the same run. Nothing when that is not a timestamp. `partition_column`
    (the upstream's) makes it the same cached scan as the upstream's scoped tests.
-#}
{% macro record_watermark(upstream, column, partition_column=none) -%}
    {%- if upstream is none or upstream is string or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "record_watermark expects a relation and one column name, got: "
            ~ upstream ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('record_watermark', 'poisonwatch')(
        upstream, column, partition_column)) }}
{%- endmacro %}

{% macro default__record_watermark(upstream, column, partition_column=none) -%}
    {%- if not execute -%}
        {{ return('') }}
    {%- endif -%}
    {%- set newest = poisonwatch.latest_value(upstream, column, partition_column) -%}
    {%- if newest is none or newest.value is none or newest.type != 'timestamp' -%}
        {{ return('') }}
    {%- endif -%}
    {{ poisonwatch.set_table_properties(this, {'poisonwatch.watermark.' ~ column: newest.value}) }}
{%- endmacro %}
