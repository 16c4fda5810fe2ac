select
    action_id,
    consumer_id,
    scheduled_group,
    cast(disabled_at as timestamp) as disabled_at,
    run_id
from {{ source('ops', 'disabled_consumers') }} as effects
{# An effect counts only once its run committed: `poisonwatch apply` appends action_log last,
   so rows of a run killed before that are not real (the next apply drops them). #}
where exists (
    select 1 as is_committed
    from {{ source('ops', 'action_log') }} as action_log
    where
        action_log.action_id = effects.action_id
        and action_log.run_id = effects.run_id
)
