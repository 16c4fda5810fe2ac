-- One row per remediation action (docs/marts.md): the union of the action families
-- in models/intermediate/remediation, each emitting the column contract of the macro
-- remediation_action_columns (statements built by the macros in macros/remediation from
-- validated, quoted values; a row whose target fails validation keeps a null statement, a
-- `review_reason`, and is never applied). `action_id` = sha2 of type, target keys and
-- policy: the same data gives the same ids, so an action recorded in the ops ledger
-- `action_log` shows `applied` (or `failed`, when a live broker could not run it) and is not
-- planned again.

{%- set review_types = ['inspect_message'] %}

with end_conversation as (
    select * from {{ ref('int_remediation_actions__end_conversation') }}
),

sb_messages as (
    select * from {{ ref('int_remediation_actions__sb_messages') }}
),

queue_re_enable as (
    select * from {{ ref('int_remediation_actions__queue_re_enable') }}
),

jms_messages as (
    select * from {{ ref('int_remediation_actions__jms_messages') }}
),

consumer_commands as (
    select * from {{ ref('int_remediation_actions__consumer_commands') }}
),

action_log as (
    -- The first committed application of each action (apply writes one row per action).
    select
        action_id,
        min(applied_at) as applied_at,
        min_by(run_id, applied_at) as run_id,
        min_by(outcome, applied_at) as outcome
    from {{ ref('stg_ops__action_log') }}
    group by action_id
),

candidates as (
    select * from end_conversation
    union all
    select * from sb_messages
    union all
    select * from queue_re_enable
    union all
    select * from jms_messages
    union all
    select * from consumer_commands
),

with_status as (
    select
        candidates.*,
        candidates.invalid_reason is not null
        or candidates.action_type in ({{ "'" ~ review_types | join("', '") ~ "'" }})
        or (candidates.action_type = 'retry_from_dlq' and candidates.request_id is null)
            as requires_review,
        action_log.applied_at,
        action_log.run_id as applied_run_id,
        case
            when action_log.action_id is null then 'pending'
            -- a live broker could not run it (poisonwatch_ops.failed_broker_actions says why)
            when action_log.outcome = 'failed' then 'failed'
            else 'applied'
        end as status
    from candidates
    left join action_log
        on candidates.action_id = action_log.action_id
),

final as (
    select
        action_id,
        action_type,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        conversation_handle,
        message_sequence_number,
        message_id,
        orig_address,
        orig_queue,
        consumer_id,
        scheduled_group,
        reason,
        policy_name,
        statement_language,
        collateral_message_count,
        requires_review,
        invalid_reason as review_reason,
        due_at,
        status,
        applied_at,
        applied_run_id as run_id,
        error_code,
        error_description,
        park_delay_minutes,
        request_id,
        activation_id,
        purge_scope,
        purge_before,
        purge_record_count,
        case when invalid_reason is null then statement end as statement,
        -- Safe order for the DBA script and for apply: consumers are stopped before their
        -- messages move; per queue, review scripts first, then the removals, then the queue is
        -- turned back on.
        row_number() over (
            order by
                case broker_kind when 'service_broker' then 1 else 2 end,
                server_name, database_name, broker_name, queue_name,
                case action_type
                    when 'disable_consumer' then 0
                    when 'inspect_message' then 1
                    when 're_enable_queue' then 3
                    when 'retry_from_dlq' then 4
                    when 'purge_failure_log' then 5
                    else 2
                end,
                consumer_id, conversation_handle, message_sequence_number, message_id, action_id
        ) as sequence_in_script
    from with_status
    -- Applied actions stay visible; an action no longer needed (the message is not live any
    -- more, the consumer is already disabled) is not planned.
    where status in ('applied', 'failed') or is_needed
)

select * from final
