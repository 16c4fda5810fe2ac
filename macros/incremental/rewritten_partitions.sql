{#-
    For a gaps-and-islands model rewritten by segments (rewrite_segments) that marks its rows
    with the run that wrote them (`rewritten_at`): remembers the partitions the run rewrites,
    the ones rewrite_segments left in the invocation's cache for the model's table, with the
    run's value (remember_latest_value, with the value recorded after the previous run:
    record_latest_value's hooks on the same column). A reader partitioned alike then takes them
    from the cache (changed_partitions_filter) instead of scanning the column, and its
    post-hook's watermark (record_watermark) is known without a scan. The partitions must be
    listed: a segment takes in whole partitions with no new row, which keep their other
    columns (`sequenced_at`). Call it after rewrite_segments. Returns them (text, sorted); []
    while parsing, when nothing is rewritten, or when rewrite_segments could not list them (the
    reader then scans the column).
-#}
{% macro rewritten_partitions(relation, partition_column, value) -%}
    {%- if relation is none or relation is string
        or not poisonwatch.is_identifier(partition_column) or value is not string -%}
        {{ exceptions.raise_compiler_error(
            "rewritten_partitions expects a relation (this), the partition column and the"
            ~ " run's value as text, got: " ~ relation ~ ", " ~ partition_column ~ ", "
            ~ value) }}
    {%- endif -%}
    {{ return(adapter.dispatch('rewritten_partitions', 'poisonwatch')(
        relation, partition_column, value)) }}
{%- endmacro %}

{% macro default__rewritten_partitions(relation, partition_column, value) -%}
    {%- if not execute or graph is not mapping -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set partitions = graph.get('poisonwatch_segment_partitions', {}).get(
        relation ~ '|' ~ partition_column) or [] -%}
    {%- if partitions | length > 0 -%}
        {%- do poisonwatch.remember_latest_value(
            relation, 'rewritten_at', 'timestamp', value, partition_column, partitions,
            previous=poisonwatch.recorded_latest_value(relation, 'rewritten_at'),
        ) -%}
    {%- endif -%}
    {{ return(partitions | sort) }}
{%- endmacro %}
