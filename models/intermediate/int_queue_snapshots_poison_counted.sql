{{ config(materialized='view') }}

-- Per queue and snapshot time, the distinct poison messages the snapshot shows (Service
-- Broker queue rows and JMS browses alike). A view: queue_health's poison count, named
-- apart from its time-ordered stream of attempts, states and events.

with poison as (
    select message_key
    from {{ ref('int_messages_classified') }}
    where classification = 'poison'
),

snapshot_messages as (
    select
        queue_key,
        snapshot_at,
        message_key
    from {{ ref('stg_service_broker__queue_snapshots') }}
    union all
    select
        queue_key,
        snapshot_at,
        {{ message_key('jms') }}
            as message_key
    from {{ ref('stg_jms__queue_snapshots') }}
),

final as (
    select
        snapshot_messages.queue_key,
        snapshot_messages.snapshot_at,
        count(distinct snapshot_messages.message_key) as poison_message_count
    from snapshot_messages
    inner join poison
        on snapshot_messages.message_key = poison.message_key
    group by snapshot_messages.queue_key, snapshot_messages.snapshot_at
)

select * from final
