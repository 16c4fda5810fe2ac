{#-
    The classification (rules.md) that a reason of poison_reason stands for:
    succeeded_after_failures -> recovered, at_threshold -> suspect, below_threshold ->
    retrying, every other reason -> poison.
-#}
{% macro poison_classification(reason) -%}
    {%- if reason is not string or reason | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "poison_classification expects a column name or SQL expression, got: " ~ reason) }}
    {%- endif -%}
    {{ return(adapter.dispatch('poison_classification', 'poisonwatch')(reason)) }}
{%- endmacro %}

{% macro default__poison_classification(reason) -%}
    case {{ reason }}
        when 'succeeded_after_failures' then 'recovered'
        when 'at_threshold' then 'suspect'
        when 'below_threshold' then 'retrying'
        else 'poison'
    end
{%- endmacro %}
