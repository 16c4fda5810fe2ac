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
{# An effect counts only once its run committed: `poisonwatch apply` appends action_log last,
   so rows of a run killed before that are not real (the next apply drops them). #}
where exists (
    select 1 as is_committed
    from {{ source('ops', 'action_log') }} as action_log
    where
        action_log.action_id = effects.action_id
        and action_log.run_id = effects.run_id
)
