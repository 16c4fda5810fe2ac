{#-
    The newest upstream watermark value an incremental model has taken in, as
    'yyyy-MM-dd HH:mm:ss[.ffffff]' text: the one record_watermark recorded on this model's
    table after its last run (recorded_watermark, a metastore lookup), else the newest value
    of the column in the model's own rows; none when it has none, and while parsing. One
    reading for changed_partitions_filter and for a model that compares its upstream's rows
    with the same bound (timestamp_bound), so both always mean the same runs.
-#}
{% macro taken_watermark(watermark_column) -%}
    {%- if not poisonwatch.is_identifier(watermark_column) -%}
        {{ exceptions.raise_compiler_error(
            "taken_watermark expects one column name, got: " ~ watermark_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('taken_watermark', 'poisonwatch')(watermark_column)) }}
{%- endmacro %}

{% macro default__taken_watermark(watermark_column) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set newest_here = poisonwatch.recorded_watermark(this, watermark_column) -%}
    {%- if newest_here is none -%}
        {%- set newest_here = run_query(
            'select cast(max(' ~ watermark_column ~ ') as string) from ' ~ this
        ).columns[0].values()[0] -%}
    {%- endif -%}
    {{ return(newest_here) }}
{%- endmacro %}
