-- Messages that are or should be dead-lettered: JMS messages seen in a dead-letter queue
-- snapshot (original address and queue kept), JMS messages dead-lettered by apply, and
-- messages classified poison whose policy action is dead_letter (JMS and Service Broker).
-- Sources are unioned on the message key and aggregated: no full outer joins.

with poison as (
    select * from {{ ref('poison_messages') }}
),

dlq_snapshot_rows as (
    select
        {{ message_key(
            'jms', {'broker_kind': "'jms'", 'queue_name': 'coalesce(orig_queue, queue_name)'}
        ) }}
            as message_key,
        snapshot_at,
        broker_name,
        queue_name,
        message_id,
        orig_address,
        orig_queue,
        delivery_count,
        body
    from {{ ref('stg_jms__queue_snapshots') }}
    where is_dead_letter_queue
),

dlq_snapshot_messages as (
    select
        message_key,
        max(broker_name) as broker_name,
        max_by(queue_name, snapshot_at) as dlq_queue_name,
        max(message_id) as message_id,
        max(orig_address) as orig_address,
        max(orig_queue) as orig_queue,
        max(delivery_count) as delivery_count,
        min(snapshot_at) as first_seen_at,
        max(snapshot_at) as last_seen_at,
        max_by(body, snapshot_at) as body
    from dlq_snapshot_rows
    group by message_key
),

applied as (
    select
        message_key,
        max(broker_kind) as broker_kind,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        max(message_id) as message_id,
        max(orig_address) as orig_address,
        max(orig_queue) as orig_queue,
        max(delivery_count) as delivery_count,
        max(reason) as reason,
        max(failure_class) as failure_class,
        min(dead_lettered_at) as dead_lettered_at,
        max(body) as body
    from {{ ref('stg_ops__dead_lettered_messages') }}
    group by message_key
),

replayed as (
    -- copies moved back to their original queue by apply (retry_from_dlq)
    select
        message_key,
        max(replayed_at) as last_replayed_at
    from {{ ref('stg_ops__replayed_messages') }}
    group by message_key
),

service_broker_bodies as (
    select
        message_key,
        max_by(
            {{ decode_message_body('message_body', 'validation') }},
            snapshot_at
        ) as body_preview
    from {{ ref('stg_service_broker__queue_snapshots') }}
    group by message_key
),

candidate_keys as (
    select message_key from dlq_snapshot_messages
    union
    select message_key from applied
    union
    select message_key from poison
    where
        classification = 'poison'
        and policy_action = 'dead_letter'
)

select
    {{ surrogate_key(['candidate_keys.message_key']) }} as dlq_message_key,
    candidate_keys.message_key,
    coalesce(poison.broker_kind, applied.broker_kind, 'jms') as broker_kind,
    coalesce(dlq.broker_name, poison.broker_name, applied.broker_name) as broker_name,
    poison.server_name,
    poison.database_name,
    coalesce(
        dlq.dlq_queue_name,
        case
            when
                coalesce(poison.broker_kind, applied.broker_kind) = 'service_broker'
                then poison.queue_name
        end,
        '{{ var("default_dlq_queue_name") }}'
    ) as queue_name,
    poison.conversation_handle,
    poison.message_sequence_number,
    coalesce(dlq.message_id, poison.message_id, applied.message_id) as message_id,
    coalesce(dlq.orig_address, poison.orig_address, poison.address, applied.orig_address)
        as orig_address,
    coalesce(dlq.orig_queue, poison.queue_name, applied.orig_queue, applied.queue_name)
        as orig_queue,
    coalesce(poison.reason, applied.reason, 'found_in_dlq') as reason,
    -- a DLQ copy may report a reset delivery count: keep the highest count known
    greatest(
        coalesce(dlq.delivery_count, 0),
        coalesce(poison.delivery_count, 0),
        coalesce(applied.delivery_count, 0)
    ) as delivery_count,
    coalesce(poison.failure_class, applied.failure_class) as failure_class,
    poison.classification,
    dlq.message_key is not null as is_in_dlq_snapshot,
    applied.message_key is not null as is_dead_lettered_by_apply,
    coalesce(dlq.first_seen_at, applied.dead_lettered_at, poison.last_failed_at) as first_seen_at,
    dlq.last_seen_at as last_seen_in_dlq_at,
    replayed.last_replayed_at,
    case
        when coalesce(poison.broker_kind, applied.broker_kind) = 'service_broker'
            then service_broker_bodies.body_preview
        else left(coalesce(dlq.body, applied.body), {{ var('body_preview_chars') }})
    end as body_preview,
    coalesce(coalesce(poison.failure_class, applied.failure_class) = 'transient', false)
        as is_replay_candidate
from candidate_keys
left join dlq_snapshot_messages as dlq
    on candidate_keys.message_key = dlq.message_key
left join applied
    on candidate_keys.message_key = applied.message_key
left join poison
    on candidate_keys.message_key = poison.message_key
left join replayed
    on candidate_keys.message_key = replayed.message_key
left join service_broker_bodies
    on candidate_keys.message_key = service_broker_bodies.message_key
