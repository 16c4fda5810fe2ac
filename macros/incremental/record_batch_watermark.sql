{#-
    The hooks that leave on an incremental model's table the newest landing batch it holds,
    for recorded_batch_watermark to read back instead of scanning the table's batch_id column
    before the next run. `state` 'pending' is the pre-hook: on an incremental run, the newest
    batch the run is about to hold (batches_taken) as `poisonwatch.batch_watermark.pending`.
    'committed' is the post-hook, after the run wrote: the same value as
    `poisonwatch.batch_watermark`, and as pending too (a full refresh or first run, which took
    every batch, has no pending value and no cached one: its newest batch_id is read from the
    table it just wrote). A run stopped between the two leaves them unequal, and the next run
    scans. Nothing while parsing, and nothing when the table holds no batch.
-#}
{% macro record_batch_watermark(state) -%}
    {%- if state not in ('pending', 'committed') -%}
        {{ exceptions.raise_compiler_error(
            "record_batch_watermark expects 'pending' or 'committed', got: " ~ state) }}
    {%- endif -%}
    {{ return(adapter.dispatch('record_batch_watermark', 'poisonwatch')(state)) }}
{%- endmacro %}

{% macro default__record_batch_watermark(state) -%}
    {%- if not execute -%}
        {{ return('') }}
    {%- endif -%}
    {#- Only an incremental run's compiling put a value in the cache. -#}
    {%- set newest = poisonwatch.batches_taken(this) -%}
    {%- if state == 'pending' -%}
        {%- if newest is none -%}
            {{ return('') }}
        {%- endif -%}
        {%- set properties = {'poisonwatch.batch_watermark.pending': newest} -%}
    {%- else -%}
        {%- if newest is none -%}
            {%- set newest = run_query(
                'select max(batch_id) from ' ~ this
            ).columns[0].values()[0] -%}
        {%- endif -%}
        {%- if newest is none -%}
            {{ return('') }}
        {%- endif -%}
        {%- set properties = {
            'poisonwatch.batch_watermark.pending': newest,
            'poisonwatch.batch_watermark': newest,
        } -%}
    {%- endif -%}
    {{ poisonwatch.set_table_properties(this, properties) }}
{%- endmacro %}
