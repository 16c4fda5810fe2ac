-- Per JMS message that failed or was redelivered, whether it was processed out of order (seed
-- 002: "ordering is broken then"): a message of the same queue first delivered after it was
-- acknowledged before it was (or while it still is not).
-- A window over messages ordered by first delivery replaces a self-join.

with messages as (
    select
        message_key,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        max(message_id) as message_id,
        min(attempted_at) as first_attempted_at,
        min(case when is_success then attempted_at end) as acknowledged_at,
        count_if(is_failure) as failure_count,
        count_if(is_redelivered) as redelivered_count
    from {{ ref('int_receive_attempts_sequenced') }}
    where broker_kind = 'jms'
    group by message_key
),

overtaken as (
    select
        messages.*,
        {#- Spark recomputes a frame ending at unbounded following for every row (quadratic:
            276 s at 1M attempts); the same rows in reverse order are a running frame. #}
        min(messages.acknowledged_at) over (
            partition by messages.broker_name, messages.queue_name
            order by messages.first_attempted_at desc, messages.message_key desc
            rows between unbounded preceding and 1 preceding
        ) as first_later_message_acknowledged_at
    from messages
),

final as (
    select
        overtaken.*,
        coalesce(
            overtaken.first_later_message_acknowledged_at
            < coalesce(overtaken.acknowledged_at, timestamp '9999-12-31 23:59:59'),
            false
        ) as has_out_of_order_processing
    from overtaken
    {# Every message can overtake, but only one that failed or was redelivered can be
        processed out of order: the others get no row (most messages, at scale). #}
    where overtaken.failure_count > 0 or overtaken.redelivered_count > 0
)

select * from final
