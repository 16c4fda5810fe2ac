-- Service Broker re_enable_queue (docs/remediation.md): a queue disabled in its latest
-- snapshot is turned back on after the actions that take its poison messages out (seed
-- 001's order). The action is tied to the removals it follows: the same removals give the
-- same action_id.

with end_conversation as (
    select * from {{ ref('int_remediation_actions__end_conversation') }}
),

sb_messages as (
    select * from {{ ref('int_remediation_actions__sb_messages') }}
),

disabled_queues as (
    select
        server_name,
        database_name,
        queue_name
    from {{ ref('queue_health') }}
    where
        broker_kind = 'service_broker'
        and is_latest_snapshot
        and is_disabled
),

removals as (
    select * from end_conversation
    union all
    select * from sb_messages
),

removals_by_queue as (
    select
        server_name,
        database_name,
        queue_name,
        max(policy_name) as policy_name,
        sort_array(
            collect_set(
                {{ surrogate_key(
                    [
                        'action_type',
                        'server_name',
                        'database_name',
                        'queue_name',
                        'conversation_handle',
                        'message_sequence_number',
                    ]
                ) }}
            )
        ) as removal_keys,
        bool_or(is_needed) as is_needed
    from removals
    where
        action_type in ('end_conversation', 'discard', 'park', 'dead_letter')
        and invalid_reason is null
    group by server_name, database_name, queue_name
),

actions as (
    select
        're_enable_queue' as action_type,
        'service_broker' as broker_kind,
        removals_by_queue.server_name,
        removals_by_queue.database_name,
        removals_by_queue.queue_name,
        'queue_disabled' as reason,
        removals_by_queue.policy_name,
        {{ poisonwatch.re_enable_queue_statement(
            'removals_by_queue.database_name',
            'removals_by_queue.queue_name'
        ) }}
            as statement,
        'tsql' as statement_language,
        removals_by_queue.is_needed,
        case
            when
                {{ poisonwatch.tsql_queue_path(
                    'removals_by_queue.database_name',
                    'removals_by_queue.queue_name'
                ) }} is null
                then 'invalid_target: database or queue name is not a valid identifier'
        end as invalid_reason,
        removals_by_queue.removal_keys as policy_keys
    from removals_by_queue
    inner join disabled_queues
        on
            removals_by_queue.server_name = disabled_queues.server_name
            and removals_by_queue.database_name = disabled_queues.database_name
            and removals_by_queue.queue_name = disabled_queues.queue_name
),

final as (
    select
        {{ poisonwatch.remediation_action_columns([
            'action_type', 'broker_kind', 'server_name', 'database_name', 'queue_name',
            'reason', 'policy_name', 'statement', 'statement_language', 'is_needed',
            'invalid_reason', 'policy_keys',
        ]) }}
    from actions
)

select * from final
