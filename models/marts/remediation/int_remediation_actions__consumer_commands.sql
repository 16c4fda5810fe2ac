-- JMS consumer actions (docs/remediation.md): for a tripped circuit breaker, as its policy's
-- on_trip says, disable_consumer (agent_command for the agent platform; its whole scheduled
-- group) or pause_queue (artemis_command: pause each queue the consumer reads, on the broker);
-- and purge_failure_log, the failure-log retention of seed 002 — after a succeeded last
-- activation its failure records, after a failed one those older than the retention.
-- A queue `poisonwatch resume` turned back on is paused again only when its consumer trips
-- anew on the failures after the resume: the breaker's longest runs never shrink.

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

consumer_queue_servers as (
    -- Each server on which a consumer that pauses on a trip reads a queue: its last success.
    select
        attempts.consumer_id,
        attempts.broker_name,
        attempts.queue_name,
        attempts.server_name,
        max(attempts.address) as address,
        max(case when attempts.is_success then attempts.attempted_at end) as last_success_at
    from attempts
    inner join breakers
        on attempts.consumer_id = breakers.consumer_id
    where
        breakers.on_trip = 'pause_queue'
        and attempts.broker_kind = 'jms'
        and attempts.queue_name is not null
    group by
        attempts.consumer_id, attempts.broker_name, attempts.queue_name, attempts.server_name
),

queue_pauses as (
    -- Whether a pause apply made is still on: no resume names it (ids, not two clocks).
    select
        paused_queues.broker_name,
        paused_queues.queue_name,
        count_if(resume_requests.request_id is null) > 0 as has_open_pause
    from paused_queues
    left join resume_requests
        on paused_queues.action_id = resume_requests.paused_action_id
    group by paused_queues.broker_name, paused_queues.queue_name
),

queue_resumes as (
    select
        broker_name,
        queue_name,
        max(resumed_at) as last_resumed_at,
        max_by(request_id, struct(resumed_at, request_id)) as last_resume_request_id
    from resume_requests
    group by broker_name, queue_name
),

failures_since_resume as (
    -- Per server and exception class, the consumer's failures after the queue's last resume
    -- and after its last success on that server; temporarily_unavailable does not count.
    select
        consumer_queue_servers.consumer_id,
        consumer_queue_servers.broker_name,
        consumer_queue_servers.queue_name,
        consumer_queue_servers.server_name,
        attempts.exception_class,
        count(*) as failure_count
    from consumer_queue_servers
    inner join queue_resumes
        on
            consumer_queue_servers.broker_name = queue_resumes.broker_name
            and consumer_queue_servers.queue_name = queue_resumes.queue_name
    inner join attempts
        on
            consumer_queue_servers.consumer_id = attempts.consumer_id
            and consumer_queue_servers.broker_name = attempts.broker_name
            and consumer_queue_servers.queue_name = attempts.queue_name
            and consumer_queue_servers.server_name = attempts.server_name
            and attempts.is_failure
            and attempts.outcome != 'temporarily_unavailable'
            and queue_resumes.last_resumed_at < attempts.attempted_at
            and (
                consumer_queue_servers.last_success_at is null
                or consumer_queue_servers.last_success_at < attempts.attempted_at
            )
    group by
        consumer_queue_servers.consumer_id,
        consumer_queue_servers.broker_name,
        consumer_queue_servers.queue_name,
        consumer_queue_servers.server_name,
        attempts.exception_class
),

servers_since_resume as (
    -- A server reports as the breaker's do: N of one type or M of any (a type's count since
    -- the resume stands for its run: no success came between them).
    select
        failures_since_resume.consumer_id,
        failures_since_resume.broker_name,
        failures_since_resume.queue_name,
        failures_since_resume.server_name,
        {{ breaker_server_reports(
            'max(failures_since_resume.failure_count)',
            'sum(failures_since_resume.failure_count)',
            'max(breakers.max_consecutive_failures)',
        ) }} as is_report
    from failures_since_resume
    inner join breakers
        on failures_since_resume.consumer_id = breakers.consumer_id
    group by
        failures_since_resume.consumer_id,
        failures_since_resume.broker_name,
        failures_since_resume.queue_name,
        failures_since_resume.server_name
),

queue_states as (
    select
        consumer_queue_servers.consumer_id,
        consumer_queue_servers.broker_name,
        consumer_queue_servers.queue_name,
        max(consumer_queue_servers.address) as address,
        coalesce(bool_or(queue_pauses.has_open_pause), false) as has_open_pause,
        max(queue_resumes.last_resumed_at) as last_resumed_at,
        max(queue_resumes.last_resume_request_id) as last_resume_request_id,
        count_if(servers_since_resume.is_report) as reporting_server_count
    from consumer_queue_servers
    left join queue_pauses
        on
            consumer_queue_servers.broker_name = queue_pauses.broker_name
            and consumer_queue_servers.queue_name = queue_pauses.queue_name
    left join queue_resumes
        on
            consumer_queue_servers.broker_name = queue_resumes.broker_name
            and consumer_queue_servers.queue_name = queue_resumes.queue_name
    left join servers_since_resume
        on
            consumer_queue_servers.consumer_id = servers_since_resume.consumer_id
            and consumer_queue_servers.broker_name = servers_since_resume.broker_name
            and consumer_queue_servers.queue_name = servers_since_resume.queue_name
            and consumer_queue_servers.server_name = servers_since_resume.server_name
    group by
        consumer_queue_servers.consumer_id,
        consumer_queue_servers.broker_name,
        consumer_queue_servers.queue_name
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
        -- not paused by apply now, and, after a resume, tripping anew: as many reporting
        -- servers as the breaker's mode needs, counting failures after the resume only
        not queue_states.has_open_pause
        and (
            queue_states.last_resumed_at is null
            or queue_states.reporting_server_count
            >= {{ breaker_reports_needed('breakers.breaker_mode') }}
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
