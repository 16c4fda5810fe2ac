{#-
    For a gaps-and-islands model rewritten by segments (rewrite_segments) that marks its rows
    with the run that wrote them (`rewritten_at`): lists, in one query, the partitions the run
    rewrites (those of its own table inside a segment, `segment_index` not null, and those of
    its new rows) and remembers them with the run's value (remember_latest_value, with the
    value recorded after the previous run: record_latest_value's hooks on the same column).
    A reader partitioned alike then takes them from the invocation's cache
    (changed_partitions_filter) instead of scanning the column, and its post-hook's watermark
    (record_watermark) is known without a scan. The partitions must be listed: a segment takes
    in whole partitions with no new row, which keep their other columns (`sequenced_at`).
    Returns them (text, sorted); [] while parsing or when nothing is rewritten.
-#}
{% macro rewritten_partitions(relation, new_rows_sql, partition_column, segment_index, value) -%}
    {%- if relation is none or relation is string or new_rows_sql is not string
        or not poisonwatch.is_identifier(partition_column) or segment_index is not string
        or value is not string -%}
        {{ exceptions.raise_compiler_error(
            "rewritten_partitions expects a relation (this), the new rows' query, the"
            ~ " partition column, the segment index expression and the run's value as text,"
            ~ " got: " ~ relation ~ ", " ~ partition_column ~ ", " ~ segment_index ~ ", "
            ~ value) }}
    {%- endif -%}
    {{ return(adapter.dispatch('rewritten_partitions', 'poisonwatch')(
        relation, new_rows_sql, partition_column, segment_index, value)) }}
{%- endmacro %}

{% macro default__rewritten_partitions(
    relation, new_rows_sql, partition_column, segment_index, value
) -%}
    {%- if not execute or segment_index == 'null' -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set partitions = poisonwatch.distinct_partitions(
        'select ' ~ partition_column ~ ' from ' ~ relation ~ ' where ' ~ segment_index
        ~ ' is not null union all select ' ~ partition_column ~ ' from (' ~ new_rows_sql
        ~ ') as new_rows',
        partition_column,
    ) -%}
    {%- if partitions | length > 0 -%}
        {%- do poisonwatch.remember_latest_value(
            relation, 'rewritten_at', 'timestamp', value, partition_column, partitions,
            previous=poisonwatch.recorded_latest_value(relation, 'rewritten_at'),
        ) -%}
    {%- endif -%}
    {{ return(partitions) }}
{%- endmacro %}
