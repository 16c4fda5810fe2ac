{#-
    The newest landing batch an incremental model has taken, as record_batch_watermark left it
    on the model's table: the pair of table properties `poisonwatch.batch_watermark.pending`
    (set before the run writes) and `poisonwatch.batch_watermark` (set after it wrote). Only
    when both hold the same value is it the newest `batch_id` in the table; a run stopped
    between the two, a table created before the properties existed or a rebuilt metastore
    gives none, and the caller reads the newest batch_id from the rows themselves. A metastore
    lookup, not a scan: `max(batch_id)` would read the column from every file of the table.
-#}
{% macro recorded_batch_watermark(relation) -%}
    {%- if relation is none or relation is string -%}
        {{ exceptions.raise_compiler_error(
            "recorded_batch_watermark expects a relation (this), got: " ~ relation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('recorded_batch_watermark', 'poisonwatch')(relation)) }}
{%- endmacro %}

{% macro default__recorded_batch_watermark(relation) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set properties = poisonwatch.table_properties(relation) -%}
    {%- set committed = properties.get('poisonwatch.batch_watermark') -%}
    {%- set pending = properties.get('poisonwatch.batch_watermark.pending') -%}
    {#- Batch ids are ingest's `b<UTC time>_<random>` (ingest/loader.py, new_batch_id); any
        other text is not a watermark this project wrote. -#}
    {%- if committed is none or committed != pending
        or not modules.re.fullmatch('b[0-9]{8}T[0-9]{6}Z_[0-9a-f]+', committed) -%}
        {{ return(none) }}
    {%- endif -%}
    {{ return(committed) }}
{%- endmacro %}
