-- Per message that is or was dead-lettered: when `poisonwatch apply` dead-lettered it
-- (committed runs only) and when a DLQ browse first showed it (JMS snapshots of dead-letter
-- queues, keyed by the original queue): poison_messages' one place to ask "is this message
-- dead-lettered?".

{#-
    A table like the rest of intermediate: as a view, each of its two key tests and
    poison_messages would join the snapshots and the ledger again.
#}

with apply_dead_lettered as (
    select
        message_key,
        min(dead_lettered_at) as dead_lettered_at
    from {{ ref('stg_ops__dead_lettered_messages') }}
    group by message_key
),

dlq_snapshot_messages as (
    select
        {{ message_key(
            'jms', {'broker_kind': "'jms'", 'queue_name': 'coalesce(orig_queue, queue_name)'}
        ) }}
            as message_key,
        min(snapshot_at) as first_seen_in_dlq_at
    from {{ ref('stg_jms__queue_snapshots') }}
    where is_dead_letter_queue
    group by message_key
),

final as (
    select
        apply_dead_lettered.dead_lettered_at,
        dlq_snapshot_messages.first_seen_in_dlq_at,
        coalesce(apply_dead_lettered.message_key, dlq_snapshot_messages.message_key)
            as message_key,
        apply_dead_lettered.message_key is not null as is_dead_lettered_by_apply,
        dlq_snapshot_messages.message_key is not null as is_in_dlq_snapshot
    from apply_dead_lettered
    full outer join dlq_snapshot_messages
        on apply_dead_lettered.message_key = dlq_snapshot_messages.message_key
)

select * from final
