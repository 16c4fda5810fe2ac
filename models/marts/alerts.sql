-- One row per open or recently resolved alert: what needs a person now. The union
-- of the alert families in models/marts/alerting, each emitting the alert contract of
-- the macro alert_columns: every kind is evaluated at points in data time (queue snapshots;
-- for breakers and failure groups their own times) against the clock int_alert_clock, never
-- the wall clock, so the same data gives the same alerts. A resolved alert is kept for its
-- policy's resolved_retention_hours (seed alert_policies). alert_id is the hash of kind,
-- subject and first_seen_at: a subject that resolves and fires anew gets a new id.

with queue_episodes as (
    select * from {{ ref('int_alerts__queue_episodes') }}
),

breaker_tripped_still_receiving as (
    select * from {{ ref('int_alerts__breaker_tripped_still_receiving') }}
),

new_failure_group as (
    select * from {{ ref('int_alerts__new_failure_group') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

all_alerts as (
    select * from queue_episodes
    union all
    select * from breaker_tripped_still_receiving
    union all
    select * from new_failure_group
),

final as (
    select
        {{ surrogate_key([
            'all_alerts.alert_kind',
            'all_alerts.broker_kind',
            'all_alerts.server_name',
            'all_alerts.database_name',
            'all_alerts.broker_name',
            'all_alerts.queue_name',
            'all_alerts.consumer_id',
            'all_alerts.failure_group_id',
            'all_alerts.first_seen_at',
        ]) }} as alert_id,
        all_alerts.alert_kind,
        all_alerts.severity,
        all_alerts.broker_kind,
        all_alerts.server_name,
        all_alerts.database_name,
        all_alerts.broker_name,
        all_alerts.queue_name,
        all_alerts.consumer_id,
        all_alerts.failure_group_id,
        all_alerts.first_seen_at,
        all_alerts.last_seen_at,
        all_alerts.status,
        all_alerts.observed_value,
        all_alerts.baseline_value,
        all_alerts.threshold,
        all_alerts.detail,
        clock.as_of as evaluated_at
    from all_alerts
    cross join clock
    where
        all_alerts.status = 'open'
        or all_alerts.last_seen_at
        >= clock.as_of - make_interval(0, 0, 0, 0, all_alerts.resolved_retention_hours, 0, 0)
)

select * from final
