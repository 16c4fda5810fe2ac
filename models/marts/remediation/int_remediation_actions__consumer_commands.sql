-- JMS consumer actions (docs/remediation.md), commands for the agent platform built by
-- agent_command: disable_consumer for a tripped circuit breaker (its whole scheduled group),
-- and purge_failure_log, the failure-log retention of seed 002 — after a succeeded last
-- activation its failure records, after a failed one those older than the retention.

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

disable_actions as (
    select
        'disable_consumer' as action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
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
    select * from purge_actions
),

final as (
    select
        {{ poisonwatch.remediation_action_columns([
            'action_type', 'broker_kind', 'server_name', 'consumer_id', 'scheduled_group',
            'reason', 'policy_name', 'statement', 'statement_language', 'is_needed',
            'invalid_reason', 'activation_id', 'purge_scope', 'purge_before',
            'purge_record_count', 'policy_keys',
        ]) }}
    from actions
)

select * from final
