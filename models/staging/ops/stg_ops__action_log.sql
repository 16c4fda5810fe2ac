select
    action_id,
    run_id,
    cast(applied_at as timestamp) as applied_at,
    outcome
from {{ source('ops', 'action_log') }}
