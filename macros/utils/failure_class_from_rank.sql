{#- The failure class of a rank given by failure_class_rank (0 -> null). -#}
{% macro failure_class_from_rank(column) -%}
    {{ return(adapter.dispatch('failure_class_from_rank', 'poisonwatch')(column)) }}
{%- endmacro %}

{% macro default__failure_class_from_rank(column) -%}
    case {{ column }}
        when 4 then 'validation'
        when 3 then 'permanent'
        when 2 then 'unknown'
        when 1 then 'transient'
    end
{%- endmacro %}
