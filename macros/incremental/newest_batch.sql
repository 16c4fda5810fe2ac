{#-
    The newest `batch_id` among a query's rows (none when it has none, and while parsing): for
    a model that takes its new rows from a query of its own, what to pass to batches_taken.
-#}
{% macro newest_batch(sql) -%}
    {%- if sql is not string or sql | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error("newest_batch expects a query, got: " ~ sql) }}
    {%- endif -%}
    {{ return(adapter.dispatch('newest_batch', 'poisonwatch')(sql)) }}
{%- endmacro %}

{% macro default__newest_batch(sql) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {{ return(run_query(
        'select max(batch_id) from (' ~ sql ~ ') as taken'
    ).columns[0].values()[0]) }}
{%- endmacro %}
