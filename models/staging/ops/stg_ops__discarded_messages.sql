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
    {{ ledger_message_key() }}
from {{ source('ops', 'discarded_messages') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
