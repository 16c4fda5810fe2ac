{#- Fails for every row where the column is negative (nulls pass). -#}
{% test not_negative(model, column_name) %}
    select {{ column_name }} as negative_value
    from {{ model }}
    where {{ column_name }} < 0
{% endtest %}
