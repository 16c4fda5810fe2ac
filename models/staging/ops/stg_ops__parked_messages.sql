select
    action_id,
    broker_kind,
    broker_name,
    server_name,
    database_name,
    queue_name,
    cast(message_sequence_number as bigint) as message_sequence_number,
    message_id,
    holding_queue,
    cast(parked_at as timestamp) as parked_at,
    cast(due_at as timestamp) as due_at,
    run_id,
    {{ ledger_message_key() }}
from {{ source('ops', 'parked_messages') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
