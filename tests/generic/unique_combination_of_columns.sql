{#- Fails for every combination of the columns that occurs more than once (dbt-utils'). -#}
{% test unique_combination_of_columns(model, combination_of_columns) %}
    {%- if combination_of_columns is string or combination_of_columns | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "unique_combination_of_columns needs a list of columns") }}
    {%- endif -%}
    select
        {{ combination_of_columns | join(', ') }},
        count(*) as row_count
    from {{ model }}
    group by {{ combination_of_columns | join(', ') }}
    having count(*) > 1
{% endtest %}
