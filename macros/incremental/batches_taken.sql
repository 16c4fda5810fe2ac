{#-
    The newest landing batch an incremental model's run has taken in, kept for its hooks
    (record_batch_watermark) in the invocation's cache. Called with the newest batch_id the
    model held before the run (unprocessed_batches_condition does) and with the newest batch of
    the rows it takes; keeps the greatest, so it is the newest batch_id of the table once the
    run has written. Returns that value (none when neither held a batch). `newest` may be none.
-#}
{% macro batches_taken(relation, newest=none) -%}
    {%- if relation is none or relation is string -%}
        {{ exceptions.raise_compiler_error(
            "batches_taken expects a relation (this), got: " ~ relation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('batches_taken', 'poisonwatch')(relation, newest)) }}
{%- endmacro %}

{% macro default__batches_taken(relation, newest=none) -%}
    {%- set cache = graph.setdefault('poisonwatch_batches_taken', {})
        if execute and graph is mapping else {} -%}
    {%- set key = relation | string -%}
    {%- set values = [cache.get(key), newest] | reject('none') | map('string') | list -%}
    {%- if values -%}
        {%- do cache.update({key: values | max}) -%}
    {%- endif -%}
    {{ return(cache.get(key)) }}
{%- endmacro %}
