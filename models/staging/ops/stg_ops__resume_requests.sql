select
    request_id,
    paused_action_id,
    broker_name,
    queue_name,
    resumed_by,
    cast(resumed_at as timestamp) as resumed_at,
    cast(is_resumed_on_broker as boolean) as is_resumed_on_broker,
    note
from {{ source('remediation_ops', 'resume_requests') }}
