{#-
    For an insert_overwrite model partitioned like its upstream: on an incremental run, a
    `where` clause keeping only the upstream partitions that a run wrote (`changed_at_column`,
    the run's stamp) after the bound changed_since_bound gives; nothing on a full
    refresh. Plain SQL, evaluated by Spark with the statement. `incremental` is the model's
    own is_incremental() (a unit test's override reaches the model, not the macros it calls).
-#}
{% macro changed_partitions_filter(upstream, partition_column, changed_at_column, incremental) -%}
    {%- if upstream is none or upstream is string
        or not poisonwatch.is_identifier(partition_column)
        or not poisonwatch.is_identifier(changed_at_column)
        or (incremental is not sameas true and incremental is not sameas false) -%}
        {{ exceptions.raise_compiler_error(
            "changed_partitions_filter expects a relation, two column names and"
            ~ " is_incremental(), got: " ~ upstream ~ ", " ~ partition_column ~ ", "
            ~ changed_at_column ~ ", " ~ incremental) }}
    {%- endif -%}
    {{ return(adapter.dispatch('changed_partitions_filter', 'poisonwatch')(
        upstream, partition_column, changed_at_column, incremental)) }}
{%- endmacro %}

{% macro default__changed_partitions_filter(
    upstream, partition_column, changed_at_column, incremental
) -%}
    {%- if incremental %}
        where {{ partition_column }} in (
            select changed.{{ partition_column }}
            from {{ upstream }} as changed
            where changed.{{ changed_at_column }} > {{ poisonwatch.changed_since_bound(changed_at_column) }}
        )
    {%- endif -%}
{%- endmacro %}
