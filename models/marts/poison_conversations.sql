-- One row per Service Broker conversation with a poison message: what is stuck behind it in
-- its conversation group and what ending it would discard (rules.md, "Conversation groups").

with poison as (
    select * from {{ ref('poison_messages') }}
    where
        broker_kind = 'service_broker'
        and classification = 'poison'
),

conversations as (
    select
        server_name,
        database_name,
        queue_name,
        conversation_handle,
        max(conversation_group_id) as conversation_group_id,
        count(*) as poison_message_count,
        min(message_sequence_number) as first_poison_sequence_number,
        bool_or(is_live) as is_live,
        max(is_conversation_ended) as is_conversation_ended,
        max(policy_name) as policy_name,
        max(policy_action) as policy_action,
        max(error_code) as error_code,
        max(error_description) as error_description,
        min(first_failed_at) as first_failed_at,
        max(last_failed_at) as last_failed_at
    from poison
    group by server_name, database_name, queue_name, conversation_handle
),

latest_snapshots as (
    select
        queue_key,
        server_name,
        database_name,
        queue_name,
        snapshot_at
    from {{ ref('int_queue_snapshots') }}
    where
        broker_kind = 'service_broker'
        and is_latest_snapshot
),

latest_messages as (
    select
        snapshot_messages.server_name,
        snapshot_messages.database_name,
        snapshot_messages.queue_name,
        snapshot_messages.conversation_group_id,
        snapshot_messages.conversation_handle,
        snapshot_messages.message_key,
        latest_snapshots.snapshot_at
    from {{ ref('stg_service_broker__queue_snapshots') }} as snapshot_messages
    inner join latest_snapshots
        on
            snapshot_messages.queue_key = latest_snapshots.queue_key
            and snapshot_messages.snapshot_at = latest_snapshots.snapshot_at
),

ended_handles as (
    select distinct
        server_name,
        database_name,
        conversation_handle
    from {{ ref('poison_messages') }}
    where is_conversation_ended
),

live_latest_messages as (
    select latest_messages.*
    from latest_messages
    left join ended_handles
        on
            latest_messages.server_name = ended_handles.server_name
            and latest_messages.database_name = ended_handles.database_name
            and latest_messages.conversation_handle = ended_handles.conversation_handle
    where ended_handles.conversation_handle is null
),

poison_keys as (
    select message_key from poison
),

blocked as (
    select
        conversations.server_name,
        conversations.database_name,
        conversations.queue_name,
        conversations.conversation_handle,
        count(distinct live_latest_messages.message_key) as blocked_message_count
    from conversations
    inner join live_latest_messages
        on
            conversations.server_name = live_latest_messages.server_name
            and conversations.database_name = live_latest_messages.database_name
            and conversations.queue_name = live_latest_messages.queue_name
            and conversations.conversation_group_id = live_latest_messages.conversation_group_id
    left join poison_keys
        on live_latest_messages.message_key = poison_keys.message_key
    where poison_keys.message_key is null
    group by
        conversations.server_name,
        conversations.database_name,
        conversations.queue_name,
        conversations.conversation_handle
),

discarded as (
    select
        server_name,
        database_name,
        queue_name,
        conversation_handle,
        count(distinct message_key) as messages_discarded_on_end
    from latest_messages
    group by server_name, database_name, queue_name, conversation_handle
)

select
    {{ surrogate_key(
        [
            "'service_broker'",
            'conversations.server_name',
            'conversations.database_name',
            'conversations.queue_name',
            'conversations.conversation_handle',
        ]
    ) }}
        as conversation_key,
    'service_broker' as broker_kind,
    conversations.server_name,
    conversations.database_name,
    conversations.queue_name,
    conversations.conversation_handle,
    conversations.conversation_group_id,
    conversations.poison_message_count,
    conversations.first_poison_sequence_number,
    coalesce(blocked.blocked_message_count, 0) as blocked_message_count,
    coalesce(discarded.messages_discarded_on_end, 0) as messages_discarded_on_end,
    conversations.is_live,
    conversations.is_conversation_ended,
    latest_snapshots.snapshot_at as latest_snapshot_at,
    conversations.policy_name,
    conversations.policy_action,
    conversations.error_code,
    conversations.error_description,
    conversations.first_failed_at,
    conversations.last_failed_at
from conversations
left join blocked
    on
        conversations.server_name = blocked.server_name
        and conversations.database_name = blocked.database_name
        and conversations.queue_name = blocked.queue_name
        and conversations.conversation_handle = blocked.conversation_handle
left join discarded
    on
        conversations.server_name = discarded.server_name
        and conversations.database_name = discarded.database_name
        and conversations.queue_name = discarded.queue_name
        and conversations.conversation_handle = discarded.conversation_handle
left join latest_snapshots
    on
        conversations.server_name = latest_snapshots.server_name
        and conversations.database_name = latest_snapshots.database_name
        and conversations.queue_name = latest_snapshots.queue_name
