{#- Fails for every non-null value that is not a sha2-256 hex key (64 lowercase hex digits). -#}
{% test is_hex_key(model, column_name) %}
    select {{ column_name }} as bad_key
    from {{ model }}
    where {{ column_name }} is not null
        and not {{ column_name }} rlike '^[0-9a-f]{64}$'
{% endtest %}
