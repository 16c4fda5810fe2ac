{#-
    The severity of a failure class, for "the worst class among its failures" (rules.md):
    validation 4 > permanent 3 > unknown 2 > transient 1; null (not a failure) 0.
    failure_class_from_rank turns the rank back into the class.
-#}
{% macro failure_class_rank(column) -%}
    {{ return(adapter.dispatch('failure_class_rank', 'poisonwatch')(column)) }}
{%- endmacro %}

{% macro default__failure_class_rank(column) -%}
    case {{ column }}
        when 'validation' then 4
        when 'permanent' then 3
        when 'unknown' then 2
        when 'transient' then 1
        else 0
    end
{%- endmacro %}
