-- One row per message with at least one failure: counts, last error, failure class and the
-- verdict (classification, reason) of docs/rules.md, plus whether it is still live.

with messages as (
    select * from {{ ref('int_messages_classified') }}
),

conversations_ended as (
    select * from {{ ref('int_conversations_ended') }}
),

dead_lettered as (
    select * from {{ ref('int_messages_dead_lettered') }}
),

removed_by_apply as (
    -- discarded or parked by apply: the message left its queue
    select
        message_key,
        min(discarded_at) as discarded_at,
        min(parked_at) as parked_at
    from (
        select
            message_key,
            discarded_at,
            cast(null as timestamp) as parked_at
        from {{ ref('stg_ops__discarded_messages') }}
        union all
        select
            message_key,
            cast(null as timestamp) as discarded_at,
            parked_at
        from {{ ref('stg_ops__parked_messages') }}
    ) as removed
    group by message_key
),

ordering as (
    select
        message_key,
        has_out_of_order_processing
    from {{ ref('int_jms__message_ordering') }}
),

redelivery as (
    select
        message_key,
        expected_redelivery_delay_ms,
        expected_redelivery_at
    from {{ ref('int_jms__redelivery_schedule') }}
    where is_latest_failure
),

joined as (
    select
        messages.*,
        dead_lettered.dead_lettered_at,
        dead_lettered.first_seen_in_dlq_at,
        ordering.has_out_of_order_processing as ordering_flag,
        redelivery.expected_redelivery_delay_ms as next_redelivery_delay_ms,
        redelivery.expected_redelivery_at as next_redelivery_at,
        coalesce(conversations_ended.attempt_ended_at, conversations_ended.apply_ended_at)
            as conversation_ended_at,
        conversations_ended.attempt_ended_at is not null
        or conversations_ended.apply_ended_at is not null
            as is_conversation_ended,
        conversations_ended.apply_ended_at is not null as is_conversation_ended_by_apply,
        coalesce(dead_lettered.is_dead_lettered_by_apply, false) as is_dead_lettered_by_apply,
        coalesce(dead_lettered.is_dead_lettered_by_apply or dead_lettered.is_in_dlq_snapshot, false)
            as is_dead_lettered,
        removed_by_apply.discarded_at is not null as is_discarded_by_apply,
        removed_by_apply.parked_at is not null as is_parked_by_apply
    from messages
    left join conversations_ended
        on
            messages.server_name = conversations_ended.server_name
            and messages.database_name = conversations_ended.database_name
            and messages.conversation_handle = conversations_ended.conversation_handle
    left join dead_lettered
        on messages.message_key = dead_lettered.message_key
    left join removed_by_apply
        on messages.message_key = removed_by_apply.message_key
    left join ordering
        on messages.message_key = ordering.message_key
    left join redelivery
        on messages.message_key = redelivery.message_key
)

select
    message_key,
    broker_kind,
    server_name,
    database_name,
    broker_name,
    queue_name,
    conversation_handle,
    conversation_group_id,
    message_sequence_number,
    message_id,
    address,
    orig_address,
    orig_queue,
    group_id,
    message_type_name,
    consumer_id,
    attempt_count,
    failure_count,
    consecutive_failure_count,
    whole_transaction_rollback_count,
    distinct_error_count,
    permanent_failure_count,
    validation_failure_count,
    temporarily_unavailable_count,
    delivery_count,
    first_attempted_at,
    first_failed_at,
    last_failed_at,
    last_attempted_at,
    last_outcome,
    last_error_key,
    last_error_message,
    failure_class,
    classification,
    reason,
    failure_threshold,
    policy_name,
    policy_action,
    error_code,
    error_description,
    park_delay_minutes,
    is_conversation_ended,
    is_conversation_ended_by_apply,
    conversation_ended_at,
    is_dead_lettered,
    is_dead_lettered_by_apply,
    dead_lettered_at,
    first_seen_in_dlq_at,
    is_discarded_by_apply,
    is_parked_by_apply,
    not(
        is_conversation_ended
        or is_dead_lettered
        or is_discarded_by_apply
        or is_parked_by_apply
    ) as is_live,
    classification = 'poison'
    and not (
        is_conversation_ended
        or is_dead_lettered
        or is_discarded_by_apply
        or is_parked_by_apply
    ) as is_live_poison,
    case when broker_kind = 'jms' then coalesce(ordering_flag, false) end
        as has_out_of_order_processing,
    case
        when broker_kind = 'jms' and classification in ('retrying', 'suspect')
            then next_redelivery_delay_ms
    end as next_redelivery_delay_ms,
    case
        when broker_kind = 'jms' and classification in ('retrying', 'suspect')
            then next_redelivery_at
    end as next_redelivery_at
from joined
