{#-
    A SQL condition keeping the landing batches a model has not taken yet: `batch_id > '<the
    newest batch_id in relation>'`, or `true` when the relation holds no batch (empty table,
    first run) and while parsing. Constant-size whatever the history: ingest gives every batch
    an id that sorts after every batch committed before it (`b<UTC time>_<random>`), so the
    newest batch a model holds is its watermark. `relation` is the calling model's own table
    (`this`), which holds a `batch_id` column.
    The newest batch is the one record_batch_watermark left on the table after the last run
    (recorded_batch_watermark, a metastore lookup), else `max(batch_id)` over its rows. It is
    kept for the run's hooks (batches_taken), which record what the run took in.
-#}
{% macro unprocessed_batches_condition(relation) -%}
    {%- if relation is none or relation is string -%}
        {{ exceptions.raise_compiler_error(
            "unprocessed_batches_condition expects a relation (this), got: " ~ relation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('unprocessed_batches_condition', 'poisonwatch')(relation)) }}
{%- endmacro %}

{% macro default__unprocessed_batches_condition(relation) -%}
    {%- if not execute -%}
        {{ return('true') }}
    {%- endif -%}
    {%- set watermark = poisonwatch.recorded_batch_watermark(relation) -%}
    {%- if watermark is none -%}
        {%- set query -%}
            select max(batch_id) from {{ relation }}
        {%- endset -%}
        {%- set watermark = run_query(query).columns[0].values()[0] -%}
    {%- endif -%}
    {%- do poisonwatch.batches_taken(relation, watermark) -%}
    {%- if watermark is none -%}
        {{ return('true') }}
    {%- endif -%}
    {{ return('batch_id > ' ~ poisonwatch.string_literal_list([watermark])) }}
{%- endmacro %}
