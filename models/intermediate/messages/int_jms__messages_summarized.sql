{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- One row per JMS message: when it was first delivered and first acknowledged, what the
-- ordering check (int_jms__message_ordering) compares, and when those two last changed.

{#-
    Incremental like its upstream: a run groups only the partitions of
    int_receive_attempts_sequenced rewritten since its last run (they hold every message a new
    attempt touched, with all its attempts), so the ordering check does not group every
    attempt of history on each run.
    It also keeps what the ordering check needs to know which of its rows a run can change:
    ordering_changed_at, the run (sequenced_at) that first saw the message or last moved its
    first delivery or its acknowledgement; and ordering_affected_from_at, the earliest
    "first later acknowledgement" such a change can alter. A message seen first, or
    acknowledged (earlier), can lower other messages' answer to its acknowledgement, never
    below it; a late attempt that moves its first delivery earlier can take it out of the
    messages after others, and so raise their answer, which was at least its first delivery.
    A message that changes again keeps the earlier of the two (least): the ordering check may
    not have run in between.
#}
with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

{# This model's rows of the partitions it rewrites; none on a full refresh, where every
    message counts as changed by the run that sequenced it. #}
previous_messages as (
    {% if is_incremental() %}
        select
            message_key,
            first_attempted_at,
            acknowledged_at,
            ordering_changed_at,
            ordering_affected_from_at
        from {{ this }}
        {{ resequenced_partitions_filter(is_incremental()) }}
    {% else %}
        select
            cast(null as string) as message_key,
            cast(null as timestamp) as first_attempted_at,
            cast(null as timestamp) as acknowledged_at,
            cast(null as timestamp) as ordering_changed_at,
            cast(null as timestamp) as ordering_affected_from_at
        where false
    {% endif %}
),

messages as (
    select
        message_key,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        max(message_id) as message_id,
        min(attempted_at) as first_attempted_at,
        min(case when is_success then attempted_at end) as acknowledged_at,
        count_if(is_failure) as failure_count,
        count_if(is_redelivered) as redelivered_count,
        max(sequenced_at) as sequenced_at,
        max(message_partition) as message_partition
    from attempts
    where broker_kind = 'jms'
    group by message_key
),

final as (
    select
        messages.message_key,
        messages.broker_name,
        messages.queue_name,
        messages.message_id,
        messages.first_attempted_at,
        messages.acknowledged_at,
        messages.failure_count,
        messages.redelivered_count,
        messages.sequenced_at,
        messages.message_partition,
        case
            when
                previous_messages.message_key is null
                or previous_messages.first_attempted_at <> messages.first_attempted_at
                or previous_messages.acknowledged_at
                is distinct from messages.acknowledged_at
                then messages.sequenced_at
            else previous_messages.ordering_changed_at
        end as ordering_changed_at,
        case
            when previous_messages.message_key is null then messages.acknowledged_at
            when previous_messages.first_attempted_at <> messages.first_attempted_at
                then least(
                    messages.first_attempted_at, previous_messages.ordering_affected_from_at
                )
            when previous_messages.acknowledged_at is distinct from messages.acknowledged_at
                then
                    least(messages.acknowledged_at, previous_messages.ordering_affected_from_at)
            else previous_messages.ordering_affected_from_at
        end as ordering_affected_from_at
    from messages
    left join previous_messages
        on messages.message_key = previous_messages.message_key
)

{# rebalance: each partition written by one task, not a file from every task. #}
select /*+ rebalance(message_partition) */ * from final
