-- Per Service Broker conversation that has ended: when an attempt ended it (outcome
-- ended_conversation) and when `poisonwatch apply` did (committed runs only):
-- poison_messages' one place to ask "has this conversation ended?".

{#-
    A table like the rest of intermediate: as a view, its key test read every attempt again
    (25.7 s of a 10M full build) and poison_messages a third time.
#}

with attempt_ended as (
    select
        server_name,
        database_name,
        conversation_handle,
        min(attempted_at) as ended_at
    from {{ ref('int_receive_attempts_sequenced') }}
    where is_conversation_end
    group by server_name, database_name, conversation_handle
),

apply_ended as (
    select
        server_name,
        database_name,
        conversation_handle,
        min(ended_at) as ended_at
    from {{ ref('stg_ops__ended_conversations') }}
    group by server_name, database_name, conversation_handle
),

final as (
    select
        attempt_ended.ended_at as attempt_ended_at,
        apply_ended.ended_at as apply_ended_at,
        coalesce(attempt_ended.server_name, apply_ended.server_name) as server_name,
        coalesce(attempt_ended.database_name, apply_ended.database_name) as database_name,
        coalesce(attempt_ended.conversation_handle, apply_ended.conversation_handle)
            as conversation_handle
    from attempt_ended
    full outer join apply_ended
        on
            attempt_ended.server_name = apply_ended.server_name
            and attempt_ended.database_name = apply_ended.database_name
            and attempt_ended.conversation_handle = apply_ended.conversation_handle
)

select * from final
