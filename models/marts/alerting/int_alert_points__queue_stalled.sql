-- queue_stalled (seed 003: a service stops processing and messages pile up unnoticed) at each
-- queue snapshot of the lookback: depth at least the threshold, depth or oldest-message age
-- rising since the previous snapshot, and no successful receive within window_minutes before
-- the snapshot. JMS dead-letter queues are left out (dlq_arrival_spike watches them).

with queue_health as (
    select * from {{ ref('queue_health') }}
),

receive_attempts_bucketed as (
    select * from {{ ref('int_receive_attempts_bucketed') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

snapshots as (
    select
        queue_health.*,
        case
            when queue_health.broker_kind = 'jms' then {{ queue_key('jms') }}
            else {{ queue_key('service_broker') }}
        end as queue_key
    from queue_health
    cross join clock
    where queue_health.snapshot_at >= clock.lookback_start
),

{#
    One stream per queue of snapshot markers and success times (the first and the last of
    each minute), so the latest success at or before each snapshot is a running max.
#}
success_times as (
    select
        receive_attempts_bucketed.queue_key,
        explode(array(
            receive_attempts_bucketed.first_succeeded_at,
            receive_attempts_bucketed.last_succeeded_at
        )) as success_at
    from receive_attempts_bucketed
    cross join clock
    where
        receive_attempts_bucketed.success_count > 0
        and receive_attempts_bucketed.bucket_start >= clock.lookback_start - interval 1 day
),

stall_stream as (
    select
        queue_key,
        snapshot_at as event_at,
        1 as event_order,
        cast(null as timestamp) as success_at,
        snapshot_at
    from snapshots
    union all
    select
        queue_key,
        success_at as event_at,
        0 as event_order,
        success_at,
        cast(null as timestamp) as snapshot_at
    from success_times
),

last_successes as (
    select
        queue_key,
        snapshot_at,
        last_success_at
    from (
        select
            queue_key,
            snapshot_at,
            max(success_at) over (
                partition by queue_key
                order by event_at, event_order
                rows between unbounded preceding and current row
            ) as last_success_at
        from stall_stream
    ) as running
    where snapshot_at is not null
),

points as (
    select
        'queue_stalled' as alert_kind,
        snapshots.broker_kind,
        snapshots.server_name,
        snapshots.database_name,
        snapshots.broker_name,
        snapshots.queue_name,
        snapshots.snapshot_at as point_at,
        snapshots.message_count,
        snapshots.oldest_message_age_seconds,
        last_successes.last_success_at,
        lag(snapshots.message_count) over queue_snapshots as previous_message_count,
        lag(snapshots.oldest_message_age_seconds) over queue_snapshots
            as previous_oldest_message_age_seconds
    from snapshots
    left join last_successes
        on
            snapshots.queue_key = last_successes.queue_key
            and snapshots.snapshot_at = last_successes.snapshot_at
    where
        not (
            snapshots.broker_kind = 'jms'
            and snapshots.queue_name rlike '{{ var("dlq_queue_pattern") }}'
        )
    window queue_snapshots as (
        partition by snapshots.queue_key
        order by snapshots.snapshot_at
    )
),

points_with_policies as (
    select
        points.*,
        policies.severity,
        policies.window_minutes,
        policies.threshold,
        policies.resolved_retention_hours,
        {{ alert_policy_rank('policies', [
            'points.broker_kind', 'points.server_name', 'points.database_name',
            'points.broker_name', 'points.queue_name', 'points.point_at',
        ]) }} as policy_rank
    from points
    {{ alert_policy_join(
        'policies', 'points.alert_kind', 'points.broker_kind', 'points.queue_name'
    ) }}
),

points_with_policy as (
    select *
    from points_with_policies
    where policy_rank = 1
),

evaluated as (
    select
        alert_kind,
        severity,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        point_at,
        threshold,
        resolved_retention_hours,
        cast(message_count as double) as observed_value,
        message_count >= threshold
        and (
            message_count > previous_message_count
            or oldest_message_age_seconds > previous_oldest_message_age_seconds
        )
        and coalesce(
            last_success_at <= point_at - make_interval(0, 0, 0, 0, 0, window_minutes, 0),
            true
        ) as is_firing,
        concat(
            message_count, ' messages, oldest ', oldest_message_age_seconds,
            ' s old (previous snapshot: ', coalesce(previous_message_count, 0),
            ' messages); last successful receive: ',
            coalesce(cast(last_success_at as string), 'none'),
            '; none within ', window_minutes, ' minutes'
        ) as detail
    from points_with_policy
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'server_name', 'database_name',
            'broker_name', 'queue_name', 'point_at', 'is_firing', 'observed_value',
            'threshold', 'detail', 'resolved_retention_hours',
        ], grain='point') }}
    from evaluated
)

select * from final
