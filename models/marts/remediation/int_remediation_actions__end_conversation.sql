-- Service Broker end_conversation (docs/remediation.md): one action per conversation with a
-- poison message whose policy ends it (disposable messages are discarded instead), with the
-- statement of end_conversation_statement and the messages ending it discards.

with targets as (
    select * from {{ ref('int_remediation_targets') }}
),

conversations as (
    select
        server_name,
        database_name,
        queue_name,
        upper(conversation_handle) as conversation_handle,
        max(messages_discarded_on_end) as messages_discarded_on_end
    from {{ ref('poison_conversations') }}
    group by server_name, database_name, queue_name, upper(conversation_handle)
),

poison_conversations as (
    select
        server_name,
        database_name,
        queue_name,
        conversation_handle,
        min(message_sequence_number) as message_sequence_number,
        max(policy_name) as policy_name,
        max(coalesce(error_code, 500)) as error_code,
        max(coalesce(error_description, 'Unable to process message.')) as error_description,
        min_by(reason, message_sequence_number) as reason,
        bool_or(is_live) as is_live,
        max(last_failed_at) as last_failed_at
    from targets
    where
        broker_kind = 'service_broker'
        and classification = 'poison'
        and reason != 'disposable'
        and policy_action = 'end_conversation'
    group by server_name, database_name, queue_name, conversation_handle
),

validated as (
    select
        *,
        {{ poisonwatch.end_conversation_statement(
            'database_name',
            'conversation_handle',
            'error_code',
            'error_description'
        ) }}
            as statement,
        case
            when not {{ poisonwatch.is_guid('conversation_handle') }}
                then 'invalid_target: conversation_handle is not a GUID'
            when {{ poisonwatch.tsql_quote_identifier('database_name') }} is null
                then 'invalid_target: database_name is not a valid identifier'
            when cast(coalesce(error_code, 500) as int) <= 0
                then 'invalid_policy: error_code must be positive'
        end as invalid_reason
    from poison_conversations
),

actions as (
    select
        'end_conversation' as action_type,
        'service_broker' as broker_kind,
        validated.server_name,
        validated.database_name,
        validated.queue_name,
        upper(validated.conversation_handle) as conversation_handle,
        validated.message_sequence_number,
        validated.reason,
        validated.policy_name,
        validated.statement,
        'tsql' as statement_language,
        validated.error_code,
        validated.error_description,
        validated.is_live as is_needed,
        validated.invalid_reason,
        coalesce(conversations.messages_discarded_on_end, 0) as collateral_message_count,
        array(
            validated.policy_name,
            cast(coalesce(validated.error_code, 500) as string),
            coalesce(validated.error_description, 'Unable to process message.'),
            '{{ var("sb_cleanup_procedure") }}'
        ) as policy_keys
    from validated
    left join conversations
        on
            validated.server_name = conversations.server_name
            and validated.database_name = conversations.database_name
            and validated.queue_name = conversations.queue_name
            and upper(validated.conversation_handle) = conversations.conversation_handle
),

final as (
    select
        {{ poisonwatch.remediation_action_columns([
            'action_type', 'broker_kind', 'server_name', 'database_name', 'queue_name',
            'conversation_handle', 'message_sequence_number', 'reason', 'policy_name',
            'statement', 'statement_language', 'error_code', 'error_description', 'is_needed',
            'invalid_reason', 'collateral_message_count', 'policy_keys',
        ]) }}
    from actions
)

select * from final
