-- dlq_arrival_spike at each JMS broker snapshot of the lookback, per original queue with
-- dead-letter arrivals: arrivals in the current window against the queue's own baseline times
-- a factor, with an absolute minimum (depth alone misses a DLQ that fills slowly and is
-- drained by hand). Windows are aligned to the clock (every window_minutes from midnight UTC);
-- the baseline is the median count of the same window on each of the baseline_days days
-- before (a day without arrivals counts 0).

with dlq_messages as (
    select * from {{ ref('dlq_messages') }}
),

queue_health as (
    select * from {{ ref('queue_health') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

arrivals as (
    select
        dlq_messages.broker_name,
        dlq_messages.orig_queue as queue_name,
        dlq_messages.first_seen_at as arrived_at
    from dlq_messages
    cross join clock
    where
        dlq_messages.broker_kind = 'jms'
        and (dlq_messages.is_in_dlq_snapshot or dlq_messages.is_dead_lettered_by_apply)
        and dlq_messages.first_seen_at >= clock.lookback_start
        and dlq_messages.first_seen_at <= clock.as_of
),

arrival_queues as (
    select distinct
        'dlq_arrival_spike' as alert_kind,
        'jms' as broker_kind,
        broker_name,
        queue_name
    from arrivals
),

queue_policies_ranked as (
    select
        arrival_queues.*,
        policies.severity,
        policies.window_minutes,
        policies.baseline_days,
        policies.threshold,
        policies.factor,
        policies.resolved_retention_hours,
        {{ alert_policy_rank(
            'policies', ['arrival_queues.broker_name', 'arrival_queues.queue_name']
        ) }} as policy_rank
    from arrival_queues
    {{ alert_policy_join(
        'policies', 'arrival_queues.alert_kind', 'arrival_queues.broker_kind',
        'arrival_queues.queue_name'
    ) }}
),

queue_policies as (
    select *
    from queue_policies_ranked
    where policy_rank = 1
),

arrival_windows as (
    select
        arrivals.broker_name,
        arrivals.queue_name,
        arrivals.arrived_at,
        floor(unix_seconds(arrivals.arrived_at) / (queue_policies.window_minutes * 60))
            as window_number
    from arrivals
    inner join queue_policies
        on
            arrivals.broker_name = queue_policies.broker_name
            and arrivals.queue_name = queue_policies.queue_name
),

window_counts as (
    select
        broker_name,
        queue_name,
        window_number,
        count(*) as arrival_count
    from arrival_windows
    group by broker_name, queue_name, window_number
),

broker_snapshots as (
    select distinct
        queue_health.broker_name,
        queue_health.snapshot_at
    from queue_health
    cross join clock
    where
        queue_health.broker_kind = 'jms'
        and queue_health.snapshot_at >= clock.lookback_start
),

points as (
    select
        queue_policies.*,
        broker_snapshots.snapshot_at,
        floor(unix_seconds(broker_snapshots.snapshot_at) / (queue_policies.window_minutes * 60))
            as window_number
    from queue_policies
    inner join broker_snapshots
        on queue_policies.broker_name = broker_snapshots.broker_name
),

current_counts as (
    select
        points.broker_name,
        points.queue_name,
        points.snapshot_at,
        count(arrival_windows.arrived_at) as arrival_count
    from points
    left join arrival_windows
        on
            points.broker_name = arrival_windows.broker_name
            and points.queue_name = arrival_windows.queue_name
            and points.window_number = arrival_windows.window_number
            and points.snapshot_at >= arrival_windows.arrived_at
    group by points.broker_name, points.queue_name, points.snapshot_at
),

baselines as (
    select
        back_days.broker_name,
        back_days.queue_name,
        back_days.snapshot_at,
        percentile(coalesce(window_counts.arrival_count, 0), 0.5) as baseline_count
    from (
        select
            points.*,
            explode(sequence(1, points.baseline_days)) as days_back
        from points
    ) as back_days
    left join window_counts
        on
            back_days.broker_name = window_counts.broker_name
            and back_days.queue_name = window_counts.queue_name
            and back_days.window_number - back_days.days_back * (1440 / back_days.window_minutes)
            = window_counts.window_number
    group by back_days.broker_name, back_days.queue_name, back_days.snapshot_at
),

evaluated as (
    select
        points.alert_kind,
        points.severity,
        points.broker_kind,
        points.broker_name,
        points.queue_name,
        points.snapshot_at as point_at,
        points.threshold,
        points.resolved_retention_hours,
        cast(current_counts.arrival_count as double) as observed_value,
        cast(baselines.baseline_count as double) as baseline_value,
        current_counts.arrival_count >= greatest(
            points.threshold, coalesce(points.factor, 1.0) * baselines.baseline_count
        ) as is_firing,
        concat(
            current_counts.arrival_count, ' dead-letter arrivals in the ', points.window_minutes,
            '-minute window; baseline (median of the previous ', points.baseline_days,
            ' days) ', baselines.baseline_count
        ) as detail
    from points
    inner join current_counts
        on
            points.broker_name = current_counts.broker_name
            and points.queue_name = current_counts.queue_name
            and points.snapshot_at = current_counts.snapshot_at
    inner join baselines
        on
            points.broker_name = baselines.broker_name
            and points.queue_name = baselines.queue_name
            and points.snapshot_at = baselines.snapshot_at
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'broker_name', 'queue_name', 'point_at',
            'is_firing', 'observed_value', 'baseline_value', 'threshold', 'detail',
            'resolved_retention_hours',
        ], grain='point') }}
    from evaluated
)

select * from final
