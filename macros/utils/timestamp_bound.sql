{#-
    A timestamp given as text ('yyyy-MM-dd HH:mm:ss[.ffffff]') as a constant SQL expression,
    `cast('<text>' as timestamp)`: the one spelling of a watermark bound, so that the models
    comparing with it and the caches keyed by it (changed_partitions_filter,
    remember_latest_value) agree.
-#}
{% macro timestamp_bound(value) -%}
    {%- if value is not string or not modules.re.fullmatch(
        '\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}(\\.\\d{1,6})?', value) -%}
        {{ exceptions.raise_compiler_error(
            "timestamp_bound expects 'yyyy-MM-dd HH:mm:ss[.ffffff]' text, got: " ~ value) }}
    {%- endif -%}
    {{ return(adapter.dispatch('timestamp_bound', 'poisonwatch')(value)) }}
{%- endmacro %}

{% macro default__timestamp_bound(value) -%}
    {{ return('cast(' ~ poisonwatch.string_literal_list([value]) ~ ' as timestamp)') }}
{%- endmacro %}
