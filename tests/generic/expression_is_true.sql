{#-
    Fails for every row where `expression` is not true (dbt-utils' expression_is_true).
    Use on a model, or on a column (then the column is prefixed to the expression).
-#}
{% test expression_is_true(model, expression, column_name=none, where=none) %}
    {%- if expression is none or expression == '' -%}
        {{ exceptions.raise_compiler_error("expression_is_true needs an expression") }}
    {%- endif -%}
    select *
    from {{ model }}
    where not coalesce(
        {%- if column_name is not none %} {{ column_name }} {% endif -%}
        {{ expression }}, false)
    {%- if where is not none %} and ({{ where }}){% endif %}
{% endtest %}
