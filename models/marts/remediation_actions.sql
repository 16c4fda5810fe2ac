-- One row per remediation action (docs/marts.md): the union of the action families
-- in models/marts/remediation, each emitting the column contract of the macro
-- remediation_action_columns (statements built by the macros in macros/remediation from
-- validated, quoted values; a row whose target fails validation keeps a null statement, a
-- `review_reason`, and is never applied). `action_id` = sha2 of type, target keys and
-- policy: the same data gives the same ids, so an action recorded in the ops ledger
-- `action_log` shows `applied` (or `failed`, when a live broker could not run it) and is not
-- planned again. A Service Broker action is only written to a script for a DBA: it stays
-- `awaiting_confirmation` until a queue snapshot taken after the script was written shows
-- its effect (`confirmed_at`).

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

sb_snapshots as (
    -- Every time a Service Broker queue was looked at (messages or state, an empty queue too).
    select
        server_name,
        database_name,
        queue_name,
        snapshot_at
    from {{ ref('queue_health') }}
    where broker_kind = 'service_broker'
),

sb_snapshot_messages as (
    select
        server_name,
        database_name,
        queue_name,
        snapshot_at,
        conversation_handle,
        message_sequence_number
    from {{ ref('stg_service_broker__queue_snapshots') }}
),

sb_enabled_states as (
    select
        server_name,
        database_name,
        queue_name,
        snapshot_at
    from {{ ref('stg_service_broker__queue_states') }}
    where is_receive_enabled
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

awaiting as (
    -- Script-only actions: apply wrote them to a DBA's script (outcome script_written).
    select
        candidates.action_id,
        candidates.action_type,
        candidates.server_name,
        candidates.database_name,
        candidates.queue_name,
        candidates.conversation_handle,
        candidates.message_sequence_number,
        action_log.applied_at as script_written_at
    from candidates
    inner join action_log
        on candidates.action_id = action_log.action_id
    where action_log.outcome = 'script_written'
),

later_snapshots as (
    select
        awaiting.*,
        sb_snapshots.snapshot_at
    from awaiting
    inner join sb_snapshots
        on
            awaiting.server_name = sb_snapshots.server_name
            and awaiting.database_name = sb_snapshots.database_name
            and awaiting.queue_name = sb_snapshots.queue_name
            and awaiting.script_written_at < sb_snapshots.snapshot_at
    where awaiting.action_type in ('end_conversation', 'discard', 'park', 'dead_letter')
),

still_there as (
    -- The snapshots in which the conversation (end_conversation) or the message is still queued.
    select distinct
        later_snapshots.action_id,
        later_snapshots.snapshot_at
    from later_snapshots
    inner join sb_snapshot_messages
        on
            later_snapshots.server_name = sb_snapshot_messages.server_name
            and later_snapshots.database_name = sb_snapshot_messages.database_name
            and later_snapshots.queue_name = sb_snapshot_messages.queue_name
            and later_snapshots.snapshot_at = sb_snapshot_messages.snapshot_at
            and later_snapshots.conversation_handle = sb_snapshot_messages.conversation_handle
            and (
                later_snapshots.action_type = 'end_conversation'
                or later_snapshots.message_sequence_number
                = sb_snapshot_messages.message_sequence_number
            )
),

confirmations as (
    -- The first snapshot after the script was written that shows its effect: the conversation
    -- or message gone from the queue, or the queue receive-enabled again.
    select
        later_snapshots.action_id,
        min(later_snapshots.snapshot_at) as confirmed_at
    from later_snapshots
    left anti join still_there
        on
            later_snapshots.action_id = still_there.action_id
            and later_snapshots.snapshot_at = still_there.snapshot_at
    group by later_snapshots.action_id
    union all
    select
        awaiting.action_id,
        min(sb_enabled_states.snapshot_at) as confirmed_at
    from awaiting
    inner join sb_enabled_states
        on
            awaiting.server_name = sb_enabled_states.server_name
            and awaiting.database_name = sb_enabled_states.database_name
            and awaiting.queue_name = sb_enabled_states.queue_name
            and awaiting.script_written_at < sb_enabled_states.snapshot_at
    where awaiting.action_type = 're_enable_queue'
    group by awaiting.action_id
),

with_status as (
    select
        candidates.*,
        confirmations.confirmed_at,
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
            when
                action_log.outcome = 'script_written' and confirmations.confirmed_at is null
                then 'awaiting_confirmation'
            else 'applied'
        end as status
    from candidates
    left join action_log
        on candidates.action_id = action_log.action_id
    left join confirmations
        on candidates.action_id = confirmations.action_id
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
        confirmed_at,
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
                    when 'pause_queue' then 0
                    when 'inspect_message' then 1
                    when 're_enable_queue' then 3
                    when 'retry_from_dlq' then 4
                    when 'purge_failure_log' then 5
                    else 2
                end,
                consumer_id, conversation_handle, message_sequence_number, message_id, action_id
        ) as sequence_in_script
    from with_status
    -- Applied (or awaiting) actions stay visible; an action no longer needed (the message is
    -- not live any more, the consumer is already disabled) is not planned.
    where
        status in ('applied', 'failed', 'awaiting_confirmation')
        or is_needed
)

select * from final
