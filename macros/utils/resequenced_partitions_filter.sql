{#-
    The `where` clause of a model partitioned by `message_partition` like
    int_receive_attempts_sequenced: on an incremental run, only the partitions that model
    rewrote (`sequenced_at`) since the calling model last read them; nothing on a full
    refresh. One name for "the partitions sequenced since my last run", so every model
    reading the sequenced attempts asks it the same way.
-#}
{% macro resequenced_partitions_filter(incremental) -%}
    {{ return(poisonwatch.changed_partitions_filter(
        ref('int_receive_attempts_sequenced'), 'message_partition', 'sequenced_at', incremental
    )) }}
{%- endmacro %}
