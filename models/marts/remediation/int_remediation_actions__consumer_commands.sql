-- JMS consumer actions (docs/remediation.md): for a tripped circuit breaker, as its policy's
-- on_trip says, disable_consumer (agent_command for the agent platform; its whole scheduled
-- group) or pause_queue (artemis_command: pause each queue the consumer reads, on the broker);
-- and purge_failure_log, the failure-log retention of seed 002 — after a succeeded last
-- activation its failure records, after a failed one those older than the retention.
-- A queue `poisonwatch resume` turned back on is paused again only when its consumer fails
-- M times in a row after the resume: the breaker's longest runs never shrink.

{%- set retention_days = var('failure_log_retention_days') %}

with breakers as (
    select * from {{ ref('consumer_circuit_breakers') }}
    where is_tripped
),

activations as (
    select * from {{ ref('stg_jms__activations') }}
),

attempts as (
    select * from {{ ref('stg_jms__receive_attempts') }}
),

paused_queues as (
    select * from {{ ref('stg_ops__paused_queues') }}
),

resume_requests as (
    select * from {{ ref('stg_ops__resume_requests') }}
),

disable_actions as (
    select
        'disable_consumer' as action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        consumer_id,
        scheduled_group,
        trip_reason as reason,
        concat('breaker_', lower(breaker_mode), '_m', cast(max_consecutive_failures as string))
            as policy_name,
        {{ poisonwatch.agent_command(
            'disable_consumer',
            {'consumer_id': 'consumer_id', 'scheduled_group': 'scheduled_group', 'reason': 'trip_reason'}
        ) }}
            as statement,
        'agent_command' as statement_language,
        not coalesce(is_disabled_by_apply, false) as is_needed,
        case when consumer_id is null then 'invalid_target: consumer_id is missing' end
            as invalid_reason,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            trip_reason, breaker_mode, cast(max_consecutive_failures as string), scheduled_group
        ) as policy_keys
    from breakers
    where on_trip = 'disable_consumer'
),

consumer_queues as (
    -- The queues each consumer that pauses on a trip reads, and its last success there.
    select
        attempts.consumer_id,
        attempts.broker_name,
        attempts.queue_name,
        max(attempts.address) as address,
        max(case when attempts.is_success then attempts.attempted_at end) as last_success_at
    from attempts
    inner join breakers
        on attempts.consumer_id = breakers.consumer_id
    where
        breakers.on_trip = 'pause_queue'
        and attempts.broker_kind = 'jms'
        and attempts.queue_name is not null
    group by attempts.consumer_id, attempts.broker_name, attempts.queue_name
),

queue_pauses as (
    select
        broker_name,
        queue_name,
        max(paused_at) as last_paused_at
    from paused_queues
    group by broker_name, queue_name
),

queue_resumes as (
    select
        broker_name,
        queue_name,
        max(resumed_at) as last_resumed_at,
        max_by(request_id, resumed_at) as last_resume_request_id
    from resume_requests
    group by broker_name, queue_name
),

queue_states as (
    select
        consumer_queues.*,
        queue_pauses.last_paused_at,
        queue_resumes.last_resumed_at,
        queue_resumes.last_resume_request_id
    from consumer_queues
    left join queue_pauses
        on
            consumer_queues.broker_name = queue_pauses.broker_name
            and consumer_queues.queue_name = queue_pauses.queue_name
    left join queue_resumes
        on
            consumer_queues.broker_name = queue_resumes.broker_name
            and consumer_queues.queue_name = queue_resumes.queue_name
),

failures_since_resume as (
    -- The consumer's failures on the queue after its resume and after its last success.
    select
        queue_states.consumer_id,
        queue_states.broker_name,
        queue_states.queue_name,
        count(*) as failure_count
    from queue_states
    inner join attempts
        on
            queue_states.consumer_id = attempts.consumer_id
            and queue_states.broker_name = attempts.broker_name
            and queue_states.queue_name = attempts.queue_name
            and attempts.is_failure
            and queue_states.last_resumed_at < attempts.attempted_at
            and (
                queue_states.last_success_at is null
                or queue_states.last_success_at < attempts.attempted_at
            )
    group by queue_states.consumer_id, queue_states.broker_name, queue_states.queue_name
),

pause_actions as (
    select
        'pause_queue' as action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        queue_states.broker_name,
        queue_states.queue_name,
        queue_states.consumer_id,
        breakers.scheduled_group,
        breakers.trip_reason as reason,
        concat(
            'breaker_', lower(breakers.breaker_mode), '_m',
            cast(breakers.max_consecutive_failures as string), '_pause'
        ) as policy_name,
        {{ poisonwatch.artemis_command(
            'queue_states.broker_name',
            'coalesce(queue_states.address, queue_states.queue_name)',
            'queue_states.queue_name',
            'pause(boolean)',
            ["'true'"],
        ) }}
            as statement,
        'artemis_jolokia' as statement_language,
        -- not paused by apply now, and, after a resume, failing M times in a row anew
        coalesce(
            queue_states.last_paused_at is null
            or queue_states.last_paused_at <= queue_states.last_resumed_at,
            false
        )
        and (
            queue_states.last_resumed_at is null
            or coalesce(failures_since_resume.failure_count, 0)
            >= breakers.max_consecutive_failures
        ) as is_needed,
        cast(null as string) as invalid_reason,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            breakers.trip_reason,
            cast(breakers.max_consecutive_failures as string),
            coalesce(queue_states.last_resume_request_id, '')
        ) as policy_keys
    from queue_states
    inner join breakers
        on queue_states.consumer_id = breakers.consumer_id
    left join failures_since_resume
        on
            queue_states.consumer_id = failures_since_resume.consumer_id
            and queue_states.broker_name = failures_since_resume.broker_name
            and queue_states.queue_name = failures_since_resume.queue_name
),

last_activations as (
    -- The last completed activation per consumer setting and server: `running` is not a
    -- completion status.
    select
        consumer_id,
        server_name,
        max_by(activation_id, started_at) as activation_id,
        max_by(activation_status, started_at) as activation_status,
        max(started_at) as started_at
    from activations
    where activation_status in ('succeeded', 'failed')
    group by consumer_id, server_name
),

purge_scopes as (
    select
        consumer_id,
        server_name,
        activation_id,
        activation_status,
        case activation_status when 'succeeded' then 'activation' else 'older_than' end
            as purge_scope,
        case
            when activation_status = 'failed'
                then
                    started_at
                    - make_interval(0, 0, 0, {{ retention_days }}, 0, 0, 0)
        end as purge_before
    from last_activations
),

purge_counts as (
    select
        purge_scopes.consumer_id,
        purge_scopes.server_name,
        purge_scopes.activation_id,
        purge_scopes.purge_scope,
        purge_scopes.purge_before,
        count(*) as purge_record_count
    from purge_scopes
    inner join attempts
        on
            purge_scopes.consumer_id = attempts.consumer_id
            and purge_scopes.server_name = attempts.server_name
            and attempts.is_failure
            and (
                (
                    purge_scopes.purge_scope = 'activation'
                    and purge_scopes.activation_id = attempts.activation_id
                )
                or (
                    purge_scopes.purge_scope = 'older_than'
                    and purge_scopes.purge_before > attempts.attempted_at
                )
            )
    group by
        purge_scopes.consumer_id,
        purge_scopes.server_name,
        purge_scopes.activation_id,
        purge_scopes.purge_scope,
        purge_scopes.purge_before
),

purge_actions as (
    select
        'purge_failure_log' as action_type,
        'jms' as broker_kind,
        server_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        consumer_id,
        cast(null as string) as scheduled_group,
        case purge_scope
            when 'activation' then 'last_activation_succeeded'
            else 'last_activation_failed'
        end as reason,
        'failure_log_retention_{{ retention_days }}d' as policy_name,
        {{ poisonwatch.agent_command(
            'purge_failure_log',
            {'consumer_id': 'consumer_id', 'server_name': 'server_name', 'activation_id': 'activation_id', 'scope': 'purge_scope', 'before': 'purge_before'}
        ) }}
            as statement,
        'agent_command' as statement_language,
        true as is_needed,
        cast(null as string) as invalid_reason,
        activation_id,
        purge_scope,
        purge_before,
        purge_record_count,
        array(cast({{ retention_days }} as string)) as policy_keys
    from purge_counts
),

actions as (
    select * from disable_actions
    union all
    select * from pause_actions
    union all
    select * from purge_actions
),

final as (
    select
        {{ poisonwatch.remediation_action_columns([
            'action_type', 'broker_kind', 'server_name', 'broker_name', 'queue_name',
            'consumer_id', 'scheduled_group', 'reason', 'policy_name', 'statement', 'statement_language', 'is_needed',
            'invalid_reason', 'activation_id', 'purge_scope', 'purge_before',
            'purge_record_count', 'policy_keys',
        ]) }}
    from actions
)

select * from final
