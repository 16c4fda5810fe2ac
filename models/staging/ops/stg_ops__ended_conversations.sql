select
    action_id,
    server_name,
    database_name,
    queue_name,
    cast(ended_at as timestamp) as ended_at,
    cast(error_code as int) as error_code,
    error_description,
    run_id,
    upper(trim(conversation_handle)) as conversation_handle
from {{ source('ops', 'ended_conversations') }} as effects
{{ committed_effects_filter('effects', source('ops', 'action_log')) }}
