select
    action_id,
    broker_kind,
    broker_name,
    server_name,
    database_name,
    queue_name,
    cast(message_sequence_number as bigint) as message_sequence_number,
    message_id,
    orig_address,
    orig_queue,
    message_type_name,
    cast(delivery_count as int) as delivery_count,
    failure_class,
    reason,
    body,
    properties,
    cast(dead_lettered_at as timestamp) as dead_lettered_at,
    run_id,
    {{ ledger_message_key(jms_queue_name='coalesce(orig_queue, queue_name)') }}
from {{ source('ops', 'dead_letter_queue') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
