-- One row per queue and snapshot time, both broker kinds. A Service Broker snapshot time is
-- any time the queue's messages (ssb_queue_snapshots) or its state (ssb_queue_states) was
-- taken, so an empty queue still has snapshots; a JMS snapshot is a browse of the queue.

with service_broker_messages as (
    select
        queue_key,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        queue_name,
        snapshot_at,
        count(*) as message_count,
        min(enqueued_at) as oldest_enqueued_at
    from {{ ref('stg_service_broker__queue_snapshots') }}
    group by queue_key, broker_kind, server_name, database_name, queue_name, snapshot_at
),

service_broker_states as (
    select
        queue_key,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        queue_name,
        snapshot_at,
        0 as message_count,
        cast(null as timestamp) as oldest_enqueued_at
    from {{ ref('stg_service_broker__queue_states') }}
),

jms_messages as (
    select
        queue_key,
        broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        broker_name,
        queue_name,
        snapshot_at,
        count(*) as message_count,
        min(enqueued_at) as oldest_enqueued_at
    from {{ ref('stg_jms__queue_snapshots') }}
    group by queue_key, broker_kind, broker_name, queue_name, snapshot_at
),

unioned as (
    select * from service_broker_messages
    union all
    select * from service_broker_states
    union all
    select * from jms_messages
),

per_snapshot as (
    select
        queue_key,
        snapshot_at,
        max(broker_kind) as broker_kind,
        max(server_name) as server_name,
        max(database_name) as database_name,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        sum(message_count) as message_count,
        min(oldest_enqueued_at) as oldest_enqueued_at
    from unioned
    group by queue_key, snapshot_at
)

select
    {{ surrogate_key(['queue_key', 'snapshot_at']) }} as queue_snapshot_key,
    per_snapshot.*,
    per_snapshot.snapshot_at
    = max(per_snapshot.snapshot_at) over (partition by per_snapshot.queue_key) as is_latest_snapshot
from per_snapshot
