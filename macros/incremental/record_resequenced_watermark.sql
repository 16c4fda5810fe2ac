{#-
    The post-hook of every model that reads the sequenced attempts through
    resequenced_partitions_filter: record_watermark on the same upstream and column that
    filter uses, named once here so the two cannot drift apart (a watermark recorded from
    another relation would make the next run skip partitions it never read).
-#}
{% macro record_resequenced_watermark() -%}
    {{ return(adapter.dispatch('record_resequenced_watermark', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__record_resequenced_watermark() -%}
    {{ return(poisonwatch.record_watermark(
        ref('int_receive_attempts_sequenced'), 'sequenced_at', 'message_partition'
    )) }}
{%- endmacro %}
