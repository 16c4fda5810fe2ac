-- One row per open or recently resolved alert: what needs a person now. The alerts of
-- every family (int_alerts_unioned; each emits the alert contract of the macro
-- alert_columns) are evaluated at points in data time (queue snapshots; for breakers and
-- failure groups their own times) against the clock int_alert_clock, never the wall clock,
-- so the same data gives the same alerts. A resolved alert is kept for its policy's
-- resolved_retention_hours (seed alert_policies). Incidents, which group a subject's alerts
-- that follow each other closely, are the mart alert_incidents.

with alerts as (
    select * from {{ ref('int_alerts_unioned') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

final as (
    select
        alerts.alert_id,
        alerts.alert_kind,
        alerts.severity,
        alerts.broker_kind,
        alerts.server_name,
        alerts.database_name,
        alerts.broker_name,
        alerts.queue_name,
        alerts.consumer_id,
        alerts.failure_group_id,
        alerts.first_seen_at,
        alerts.last_seen_at,
        alerts.status,
        alerts.observed_value,
        alerts.baseline_value,
        alerts.threshold,
        alerts.detail,
        clock.as_of as evaluated_at
    from alerts
    cross join clock
    where
        alerts.status = 'open'
        or alerts.last_seen_at
        >= clock.as_of - make_interval(0, 0, 0, 0, alerts.resolved_retention_hours, 0, 0)
)

select * from final
