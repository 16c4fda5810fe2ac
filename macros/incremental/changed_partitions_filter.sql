{#-
    For a model partitioned like its upstream (insert_overwrite on `partition_column`): a
    `where` clause keeping only the upstream partitions written since this model last ran,
    i.e. whose `watermark_column` (a timestamp: the run that wrote them) is newer than the
    newest one here. Nothing on a full refresh or first run (all partitions); `where false`
    when no partition changed, so an incremental run with no new data rewrites nothing.
    `incremental` is the model's own is_incremental() (a unit test's override reaches the
    model, not the macros it calls).
-#}
{% macro changed_partitions_filter(upstream, partition_column, watermark_column, incremental) -%}
    {%- if upstream is none or partition_column is not string
        or watermark_column is not string -%}
        {{ exceptions.raise_compiler_error(
            "changed_partitions_filter expects a relation and two column names, got: "
            ~ upstream ~ ", " ~ partition_column ~ ", " ~ watermark_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('changed_partitions_filter', 'poisonwatch')(
        upstream, partition_column, watermark_column, incremental)) }}
{%- endmacro %}

{% macro default__changed_partitions_filter(
    upstream, partition_column, watermark_column, incremental
) -%}
    {%- if incremental -%}
        {#- The newest watermark here is read first and compared as a constant: Parquet's
            min/max statistics then skip the upstream files no run wrote since (a subquery
            in the filter would make every run read the column from all of history). -#}
        {#- The watermark recorded after the last run (record_watermark, a metastore
            lookup); without one, the newest value in this model's own rows. -#}
        {%- set newest_here = poisonwatch.taken_watermark(watermark_column) -%}
        {%- set bound = "timestamp '0001-01-01'" if newest_here is none
            else poisonwatch.timestamp_bound(newest_here) -%}
        {#- Models that ran after the same upstream run share one bound: the partitions are
            listed once per invocation and bound (the upstream is built before them and
            nothing rebuilds it in the same run); an upstream that knows them puts them here
            first (remember_latest_value). -#}
        {%- set cache = graph.setdefault('poisonwatch_changed_partitions', {})
            if execute and graph is mapping else {} -%}
        {%- set key = upstream ~ '|' ~ partition_column ~ '|' ~ watermark_column ~ '|' ~ bound -%}
        {%- if key not in cache -%}
            {%- do cache.update({key: get_column_values(
                upstream, partition_column, where=watermark_column ~ ' > ' ~ bound
            )}) -%}
        {%- endif -%}
        {%- set partitions = cache[key] -%}
        {#- A model partitioned like its upstream that carries the upstream's watermark column
            (meta tests_check_latest: its scoped tests) writes the upstream's newest value in
            the partitions that hold it upstream, when that value is newer than the bound and
            the invocation already knows it: its tests take them from here instead of
            scanning the model's column. -#}
        {%- set upstream_latest = poisonwatch.latest_value(
            upstream, watermark_column, partition_column, scan=false) if execute else none -%}
        {%- set partition_by = config.get('partition_by') -%}
        {%- set meta = config.get('meta') or {} -%}
        {%- if partitions | length > 0 and upstream_latest is mapping
            and upstream_latest.type == 'timestamp' and upstream_latest.value is not none
            and (newest_here is none or upstream_latest.value > newest_here)
            and partition_by in ([partition_column], partition_column)
            and meta.get('tests_check_latest') == watermark_column -%}
            {%- do poisonwatch.remember_latest_value(
                this, watermark_column, 'timestamp', upstream_latest.value, partition_column,
                upstream_latest.partitions or partitions,
            ) -%}
        {%- endif -%}
        {%- if partitions | length > 0 -%}
            where {{ partition_column }} in ({{ string_literal_list(partitions) }})
        {%- else -%}
            where false
        {%- endif -%}
    {%- endif -%}
{%- endmacro %}
