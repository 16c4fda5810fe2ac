-- The alerts of the point families (queue state, stalled queues, DLQ arrival spikes): the
-- consecutive firing points of one kind and subject form one alert (gaps and islands). It is
-- open while it fires at the subject's latest point, resolved after; a subject that stops
-- firing and fires anew has two alerts.

{%- set subject = [
    'alert_kind', 'broker_kind', 'server_name', 'database_name', 'broker_name', 'queue_name',
] %}

with queue_state as (
    select * from {{ ref('int_alert_points__queue_state') }}
),

queue_stalled as (
    select * from {{ ref('int_alert_points__queue_stalled') }}
),

dlq_arrival_spike as (
    select * from {{ ref('int_alert_points__dlq_arrival_spike') }}
),

points as (
    select * from queue_state
    union all
    select * from queue_stalled
    union all
    select * from dlq_arrival_spike
),

{# An episode is numbered by the quiet points before it: constant while the subject fires. #}
episodes as (
    select
        *,
        sum(case when is_firing then 0 else 1 end) over (
            partition by {{ subject | join(', ') }}
            order by point_at
            rows between unbounded preceding and current row
        ) as quiet_points_before,
        max(point_at) over (partition by {{ subject | join(', ') }}) as latest_point_at
    from points
),

alerts as (
    select
        alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        max(severity) as severity,
        max(consumer_id) as consumer_id,
        max(failure_group_id) as failure_group_id,
        min(point_at) as first_seen_at,
        max(point_at) as last_seen_at,
        case when max(point_at) = max(latest_point_at) then 'open' else 'resolved' end as status,
        max_by(observed_value, point_at) as observed_value,
        max_by(baseline_value, point_at) as baseline_value,
        max(threshold) as threshold,
        max_by(detail, point_at) as detail,
        max(resolved_retention_hours) as resolved_retention_hours
    from episodes
    where is_firing
    group by {{ subject | join(', ') }}, quiet_points_before
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'server_name', 'database_name',
            'broker_name', 'queue_name', 'consumer_id', 'failure_group_id', 'first_seen_at',
            'last_seen_at', 'status', 'observed_value', 'baseline_value', 'threshold', 'detail',
            'resolved_retention_hours',
        ], grain='alert') }}
    from alerts
)

select * from final
