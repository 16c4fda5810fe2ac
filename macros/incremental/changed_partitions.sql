{#-
    The upstream partitions written since the calling incremental model last ran: those whose
    `watermark_column` (a timestamp: the run that wrote them) is newer than the newest value
    the model has taken in (taken_watermark). Returns `{'partitions': [text, ...], 'taken':
    <that value as text, or none>}`; while parsing, no partitions. The bound is compared as a
    constant, so Parquet statistics skip the upstream files no run wrote since. Models with the
    same bound share one listing per invocation (the upstream is built before them and nothing
    rebuilds it in the same run), which int_receive_attempts_sequenced fills itself for the
    bound of its previous run (remember_latest_value). changed_partitions_filter's listing.
-#}
{% macro changed_partitions(upstream, partition_column, watermark_column) -%}
    {%- if upstream is none or upstream is string or not poisonwatch.is_identifier(partition_column)
        or not poisonwatch.is_identifier(watermark_column) -%}
        {{ exceptions.raise_compiler_error(
            "changed_partitions expects a relation and two column names, got: "
            ~ upstream ~ ", " ~ partition_column ~ ", " ~ watermark_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('changed_partitions', 'poisonwatch')(
        upstream, partition_column, watermark_column)) }}
{%- endmacro %}

{% macro default__changed_partitions(upstream, partition_column, watermark_column) -%}
    {%- if not execute -%}
        {{ return({'partitions': [], 'taken': none}) }}
    {%- endif -%}
    {#- The watermark recorded after the last run (record_watermark, a metastore lookup);
        without one, the newest value in this model's own rows. -#}
    {%- set newest_here = poisonwatch.taken_watermark(watermark_column) -%}
    {%- set bound = "timestamp '0001-01-01'" if newest_here is none
        else poisonwatch.timestamp_bound(newest_here) -%}
    {%- set cache = graph.setdefault('poisonwatch_changed_partitions', {})
        if graph is mapping else {} -%}
    {%- set key = upstream ~ '|' ~ partition_column ~ '|' ~ watermark_column ~ '|' ~ bound -%}
    {%- if key not in cache -%}
        {%- do cache.update({key: get_column_values(
            upstream, partition_column, where=watermark_column ~ ' > ' ~ bound
        )}) -%}
    {%- endif -%}
    {{ return({'partitions': cache[key], 'taken': newest_here}) }}
{%- endmacro %}
