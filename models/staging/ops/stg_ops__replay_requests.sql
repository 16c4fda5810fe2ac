select
    request_id,
    broker_name,
    queue_name,
    message_id,
    requested_by,
    cast(requested_at as timestamp) as requested_at,
    note
from {{ source('remediation_ops', 'replay_requests') }}
