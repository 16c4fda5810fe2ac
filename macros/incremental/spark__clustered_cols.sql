{#-
    dbt-spark's `clustered by (...) into N buckets` clause (root-project override of
    spark__clustered_cols, dispatched from the `dbt` namespace), with one addition: a model
    whose meta sets `attempts_per_bucket` gets message_bucket_count(buckets,
    attempts_per_bucket) buckets, chosen when the table is created, instead of `buckets`
    itself. Only create-table statements use this clause; incremental runs insert into the
    table as it is.
-#}
{% macro spark__clustered_cols(label, required=false) -%}
    {%- set cols = config.get('clustered_by', validator=validation.any[list, basestring]) -%}
    {%- set buckets = config.get('buckets', validator=validation.any[int]) -%}
    {%- set per_bucket = (config.get('meta') or {}).get('attempts_per_bucket') -%}
    {%- if cols is not none and buckets is not none -%}
        {%- if per_bucket is not none -%}
            {%- set buckets = message_bucket_count(buckets, per_bucket) -%}
        {%- endif -%}
        {%- if cols is string -%}
            {%- set cols = [cols] -%}
        {%- endif %}
    {{ label }} ({{ cols | join(', ') }}) into {{ buckets }} buckets
    {%- endif -%}
{%- endmacro %}
