{#-
    dbt's `relationships` test for a child and a parent partitioned alike (every key lives in
    the same partition of both, as the message tables keep each message in its
    `message_partition`): a child value fails when no parent row in the child row's partitions
    holds it. The parent is read only in the partitions of the child rows the test checks:
    a semi-join on the partition column, which Spark prunes at run time (dynamic partition
    pruning), so a test scoped to what a build added does not read the parent's whole
    history.
-#}
{% test relationships_in_partitions(model, column_name, to, field, partition_column) %}
    {%- if not poisonwatch.is_identifier(partition_column) -%}
        {{ exceptions.raise_compiler_error(
            "relationships_in_partitions: partition_column must be one column name, got: "
            ~ partition_column) }}
    {%- endif %}

with child as (
    select
        {{ column_name }} as from_field,
        {{ partition_column }} as from_partition
    from {{ model }}
    where {{ column_name }} is not null
),

parent as (
    select {{ field }} as to_field
    from {{ to }}
    where {{ partition_column }} in (select child.from_partition from child)
)

select child.from_field
from child
left join parent
    on child.from_field = parent.to_field
where parent.to_field is null

{% endtest %}
