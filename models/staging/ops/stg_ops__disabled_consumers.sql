select
    action_id,
    consumer_id,
    scheduled_group,
    cast(disabled_at as timestamp) as disabled_at,
    run_id
from {{ source('ops', 'disabled_consumers') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
