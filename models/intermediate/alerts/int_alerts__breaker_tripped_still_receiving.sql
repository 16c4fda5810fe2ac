-- breaker_tripped_still_receiving: a JMS consumer whose breaker tripped (by its own
-- failures, rules.md "Circuit breakers") but who still has at least the threshold attempts
-- after the trip: the fuse is not wired in. One alert per consumer, from its first to its
-- last attempt after the trip; resolved once apply disabled the consumer.

with consumer_circuit_breakers as (
    select * from {{ ref('consumer_circuit_breakers') }}
),

consumer_failure_runs as (
    select * from {{ ref('int_jms__consumer_failure_runs') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

breakers as (
    select * from consumer_circuit_breakers
    where is_self_tripped
),

runs as (
    select
        consumer_failure_runs.consumer_id,
        consumer_failure_runs.server_name,
        consumer_failure_runs.attempted_at,
        consumer_failure_runs.same_type_run,
        consumer_failure_runs.any_type_run
    from consumer_failure_runs
    left semi join breakers
        on consumer_failure_runs.consumer_id = breakers.consumer_id
),

server_reports as (
    select
        runs.consumer_id,
        runs.server_name,
        min(runs.attempted_at) as reported_at
    from runs
    inner join breakers
        on runs.consumer_id = breakers.consumer_id
    where {{ breaker_server_reports(
        'runs.same_type_run', 'runs.any_type_run', 'breakers.max_consecutive_failures'
    ) }}
    group by runs.consumer_id, runs.server_name
),

trips as (
    select
        server_reports.consumer_id,
        element_at(
            array_sort(collect_list(server_reports.reported_at)),
            {{ breaker_reports_needed('max(breakers.breaker_mode)') }}
        ) as tripped_at
    from server_reports
    inner join breakers
        on server_reports.consumer_id = breakers.consumer_id
    group by server_reports.consumer_id
),

after_trip as (
    select
        'breaker_tripped_still_receiving' as alert_kind,
        'jms' as broker_kind,
        trips.consumer_id,
        trips.tripped_at,
        count(*) as attempts_after_trip,
        min(runs.attempted_at) as first_after_at,
        max(runs.attempted_at) as last_after_at
    from trips
    inner join runs
        on
            trips.consumer_id = runs.consumer_id
            and trips.tripped_at < runs.attempted_at
    group by trips.consumer_id, trips.tripped_at
),

after_trip_with_policy as (
    select
        after_trip.*,
        policies.severity,
        policies.threshold,
        policies.resolved_retention_hours
    from after_trip
    {{ alert_policy_join(
        'policies', 'after_trip.alert_kind', 'after_trip.broker_kind', none,
        partition_by=['after_trip.consumer_id']
    ) }}
),

alerts as (
    select
        after_trip_with_policy.alert_kind,
        after_trip_with_policy.severity,
        after_trip_with_policy.broker_kind,
        after_trip_with_policy.consumer_id,
        after_trip_with_policy.first_after_at as first_seen_at,
        after_trip_with_policy.last_after_at as last_seen_at,
        after_trip_with_policy.threshold,
        after_trip_with_policy.resolved_retention_hours,
        cast(after_trip_with_policy.attempts_after_trip as double) as observed_value,
        case when breakers.is_disabled_by_apply then 'resolved' else 'open' end as status,
        concat(
            'tripped at ', cast(after_trip_with_policy.tripped_at as string), ' (',
            breakers.trip_reason, '); ', after_trip_with_policy.attempts_after_trip,
            ' attempts since'
        ) as detail
    from after_trip_with_policy
    inner join breakers
        on after_trip_with_policy.consumer_id = breakers.consumer_id
    where after_trip_with_policy.attempts_after_trip >= after_trip_with_policy.threshold
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'consumer_id', 'first_seen_at',
            'last_seen_at', 'status', 'observed_value', 'threshold', 'detail',
            'resolved_retention_hours',
        ], grain='alert') }}
    from alerts
)

select * from final
