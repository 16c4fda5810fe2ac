-- Failures grouped by error number / exception class and normalised message (GUIDs, quoted
-- literals and numbers replaced), as ServiceControl groups failed messages.

{#-
    Adds up the per-partition groups of int_failures_grouped (incremental), so a run reads a
    few rows per hour of history instead of every failed attempt.
#}
with partition_groups as (
    select * from {{ ref('int_failures_grouped') }}
),

final as (
    select
        failure_group_id,
        broker_kind,
        nullif(error_key, '') as error_key,
        {{ failure_class_from_rank('max(failure_class_rank)') }} as failure_class,
        normalized_message,
        min(example_failure).error_message as example_message,
        sum(failure_count) as failure_count,
        sum(message_count) as message_count,
        cast(size(array_distinct(flatten(collect_list(queue_keys)))) as bigint) as queue_count,
        min(first_seen_at) as first_seen_at,
        max(last_seen_at) as last_seen_at
    from partition_groups
    group by failure_group_id, broker_kind, error_key, normalized_message
)

select * from final
