select
    action_id,
    request_id,
    broker_name,
    queue_name,
    message_id,
    orig_address,
    orig_queue,
    cast(replayed_at as timestamp) as replayed_at,
    run_id,
    {{ message_key(
        'jms', {'broker_kind': "'jms'", 'queue_name': 'coalesce(orig_queue, queue_name)'}
    ) }}
        as message_key
from {{ source('ops', 'replayed_messages') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
