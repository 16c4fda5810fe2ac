{#-
    The start of the fixed-length time bucket holding a timestamp, as sortable text
    ('yyyy-MM-dd HH:mm:ss', UTC): the partition value of the incremental models. String
    order is time order, so `>=` on it selects the buckets from a cutoff on.
-#}
{% macro time_bucket(column, seconds) -%}
    {%- if column is none or seconds is none or (seconds | int) < 1 -%}
        {{ exceptions.raise_compiler_error(
            "time_bucket expects a column and a positive number of seconds, got: "
            ~ column ~ ", " ~ seconds) }}
    {%- endif -%}
    {{ return(adapter.dispatch('time_bucket', 'poisonwatch')(column, seconds | int)) }}
{%- endmacro %}

{% macro default__time_bucket(column, seconds) -%}
    date_format(
        timestamp_seconds(floor(unix_seconds({{ column }}) / {{ seconds }}) * {{ seconds }}),
        'yyyy-MM-dd HH:mm:ss'
    )
{%- endmacro %}
