{#-
    The `where` clause of an incremental model fed by int_receive_attempts_sequenced: on a
    full refresh just `condition`; on an incremental run, the upstream partitions rewritten
    since this model last ran, less the landing batches this model has already taken
    (its `batch_id` column), and `condition`. `incremental` is the model's is_incremental().
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
        {%- set processed_batches = get_column_values(this, 'batch_id') -%}
        {%- if processed_batches | length > 0 %}
            and batch_id not in ({{ string_literal_list(processed_batches) }})
        {%- endif %}
        and ({{ condition }})
    {%- else -%}
        where {{ condition }}
    {%- endif -%}
{%- endmacro %}
