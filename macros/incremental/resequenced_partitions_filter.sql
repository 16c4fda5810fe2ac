{#-
    The `where` clause of a model partitioned by `message_partition` like
    int_receive_attempts_sequenced: on an incremental run, only the partitions that model
    rewrote (`sequenced_at`) since the calling model last ran; nothing on a full refresh.
    One name for "the partitions sequenced since my last run", so every model reading the
    sequenced attempts asks it the same way. `incremental` is the model's is_incremental().
    Its models record what they have read with the post-hook record_resequenced_watermark.
-#}
{% macro resequenced_partitions_filter(incremental) -%}
    {%- if incremental is not sameas true and incremental is not sameas false -%}
        {{ exceptions.raise_compiler_error(
            "resequenced_partitions_filter expects is_incremental(), got: " ~ incremental) }}
    {%- endif -%}
    {{ return(adapter.dispatch('resequenced_partitions_filter', 'poisonwatch')(incremental)) }}
{%- endmacro %}

{% macro default__resequenced_partitions_filter(incremental) -%}
    {{ changed_partitions_filter(
        ref('int_receive_attempts_sequenced'), 'message_partition', 'sequenced_at', incremental
    ) }}
{%- endmacro %}
