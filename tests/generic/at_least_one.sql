{#- Fails when the column has no non-null value at all (dbt-utils' at_least_one). -#}
{% test at_least_one(model, column_name) %}
    select count({{ column_name }}) as non_null_count
    from {{ model }}
    having count({{ column_name }}) = 0
{% endtest %}
