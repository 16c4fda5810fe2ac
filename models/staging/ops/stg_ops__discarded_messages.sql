select
    action_id,
    broker_kind,
    broker_name,
    server_name,
    database_name,
    queue_name,
    cast(message_sequence_number as bigint) as message_sequence_number,
    message_id,
    reason,
    cast(discarded_at as timestamp) as discarded_at,
    run_id,
    upper(trim(conversation_handle)) as conversation_handle,
    case
        when broker_kind = 'jms'
            then {{ message_key('jms') }}
        else
            {{ message_key(
                'service_broker',
                {
                    'conversation_handle': 'upper(trim(conversation_handle))',
                    'message_sequence_number': 'cast(message_sequence_number as bigint)',
                }
            ) }}
    end as message_key
from {{ source('ops', 'discarded_messages') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
