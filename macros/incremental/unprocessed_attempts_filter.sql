{#-
    The `where` clause of an incremental model fed by int_receive_attempts_sequenced: on a
    full refresh just `condition`; on an incremental run, the upstream partitions rewritten
    after the bound of resequenced_partitions_filter, less the landing batches this model has already taken (up to
    the newest `batch_id` it holds: unprocessed_batches_condition, constant-size), and
    `condition`. `incremental` is the model's is_incremental().
-#}
{% macro unprocessed_attempts_filter(incremental, condition) -%}
    {%- if condition is not string or condition | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "unprocessed_attempts_filter expects a SQL condition, got: " ~ condition) }}
    {%- endif -%}
    {{ return(adapter.dispatch('unprocessed_attempts_filter', 'poisonwatch')(
        incremental, condition)) }}
{%- endmacro %}

{% macro default__unprocessed_attempts_filter(incremental, condition) -%}
    {%- if incremental -%}
        {{ resequenced_partitions_filter(true) }}
        and {{ unprocessed_batches_condition(this) }}
        and ({{ condition }})
    {%- else -%}
        where {{ condition }}
    {%- endif -%}
{%- endmacro %}
