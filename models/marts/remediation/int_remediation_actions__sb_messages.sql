-- Service Broker per-message actions (docs/remediation.md): inspect_message for a suspect
-- message (review only), discard for a disposable one, park or dead_letter when its policy
-- says so; the statements of inspect_message_statement and receive_message_statement.

{#- The message a receive_message_statement takes out (its positional arguments). #}
{%- set message = [
    'database_name', 'queue_name', 'conversation_handle', 'message_sequence_number',
] %}

with targets as (
    select * from {{ ref('int_remediation_targets') }}
),

message_targets as (
    select
        *,
        case
            when classification = 'suspect' then 'inspect_message'
            when reason = 'disposable' then 'discard'
            else policy_action
        end as action_type
    from targets
    where
        broker_kind = 'service_broker'
        and (
            classification = 'suspect'
            or reason = 'disposable'
            or policy_action in ('park', 'dead_letter')
        )
),

actions as (
    select
        action_type,
        broker_kind,
        server_name,
        database_name,
        queue_name,
        upper(conversation_handle) as conversation_handle,
        message_sequence_number,
        reason,
        policy_name,
        case action_type
            when 'inspect_message'
                then
                    {{ poisonwatch.inspect_message_statement(
                        'database_name',
                        'queue_name',
                        'conversation_handle'
                    ) }}
            when 'discard'
                then {{ poisonwatch.receive_message_statement(*message) }}
            when 'park'
                then
                    {{ poisonwatch.receive_message_statement(
                        *message,
                        target_table=var('sb_holding_table'),
                        delay_minutes='park_delay_minutes'
                    ) }}
            when 'dead_letter'
                then
                    {{ poisonwatch.receive_message_statement(
                        *message,
                        target_table=var('sb_dead_letter_table')
                    ) }}
        end as statement,
        'tsql' as statement_language,
        case when action_type = 'park' then park_delay_minutes end as park_delay_minutes,
        case when action_type = 'park' then park_due_at end as due_at,
        is_live as is_needed,
        case
            when not {{ poisonwatch.is_guid('conversation_handle') }}
                then 'invalid_target: conversation_handle is not a GUID'
            when {{ poisonwatch.tsql_queue_path('database_name', 'queue_name') }} is null
                then 'invalid_target: database or queue name is not a valid identifier'
            when message_sequence_number is null
                then 'invalid_target: message_sequence_number is missing'
            when action_type = 'park' and park_delay_minutes is null
                then 'invalid_policy: park_delay_minutes is missing'
        end as invalid_reason,
        array(
            policy_name,
            case when action_type = 'park' then cast(park_delay_minutes as string) end,
            case
                when
                    action_type = 'park'
                    then '{{ var("sb_holding_table") }}'
            end,
            case
                when
                    action_type = 'dead_letter'
                    then '{{ var("sb_dead_letter_table") }}'
            end
        ) as policy_keys
    from message_targets
),

final as (
    select
        {{ poisonwatch.remediation_action_columns([
            'action_type', 'broker_kind', 'server_name', 'database_name', 'queue_name',
            'conversation_handle', 'message_sequence_number', 'reason', 'policy_name',
            'statement', 'statement_language', 'park_delay_minutes', 'due_at', 'is_needed',
            'invalid_reason', 'policy_keys',
        ]) }}
    from actions
)

select * from final
