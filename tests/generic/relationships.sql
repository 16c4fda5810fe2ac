{#-
    dbt's built-in `relationships` test (the project's version wins over the global one), with
    one optional argument: `partition_column`, for a child and a parent partitioned alike (every
    key lives in the same partition of both, as the message tables keep each message in its
    `message_partition`). The parent is then read only in the partitions of the child rows the
    test checks, named as literals so that Spark prunes them: on an incremental run the child's
    rows are those its latest run wrote (test_scope_filter), and the parent's whole history is
    not read to find a few thousand keys.
    Without it, the parent is read whole, as dbt's test does.
-#}
{% test relationships(model, column_name, to, field, partition_column=none) %}
    {%- set partitions = none -%}
    {%- if partition_column is not none -%}
        {%- if not poisonwatch.is_identifier(partition_column) -%}
            {{ exceptions.raise_compiler_error(
                "relationships: partition_column must be one column name, got: "
                ~ partition_column) }}
        {%- endif -%}
        {#- As changed_partitions_filter lists the partitions it reads. -#}
        {%- set partitions = poisonwatch.get_column_values(
            model, partition_column, where=column_name ~ ' is not null'
        ) -%}
    {%- endif %}

with child as (
    select {{ column_name }} as from_field
    from {{ model }}
    where {{ column_name }} is not null
),

parent as (
    select {{ field }} as to_field
    from {{ to }}
    {%- if partitions is not none %}
        {%- if partitions | length > 0 %}
    where {{ partition_column }} in ({{ poisonwatch.string_literal_list(partitions) }})
        {%- else %}
    where false
        {%- endif %}
    {%- endif %}
)

select child.from_field
from child
left join parent
    on child.from_field = parent.to_field
where parent.to_field is null

{% endtest %}
