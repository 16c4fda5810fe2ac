select
    action_id,
    broker_name,
    queue_name,
    consumer_id,
    reason,
    cast(paused_at as timestamp) as paused_at,
    run_id
from {{ source('ops', 'paused_queues') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
