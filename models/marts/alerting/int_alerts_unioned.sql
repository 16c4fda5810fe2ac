-- Every alert of the lookback, of every family, with its id: the union the mart alerts
-- filters by retention and the mart alert_incidents groups into incidents. alert_id is the
-- hash of kind, subject and first_seen_at: a subject that resolves and fires anew gets a
-- new id.

with queue_episodes as (
    select * from {{ ref('int_alerts__queue_episodes') }}
),

breaker_tripped_still_receiving as (
    select * from {{ ref('int_alerts__breaker_tripped_still_receiving') }}
),

new_failure_group as (
    select * from {{ ref('int_alerts__new_failure_group') }}
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
            'alert_kind',
            'broker_kind',
            'server_name',
            'database_name',
            'broker_name',
            'queue_name',
            'consumer_id',
            'failure_group_id',
            'first_seen_at',
        ]) }} as alert_id,
        alert_kind,
        severity,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        consumer_id,
        failure_group_id,
        first_seen_at,
        last_seen_at,
        status,
        observed_value,
        baseline_value,
        threshold,
        detail,
        resolved_retention_hours
    from all_alerts
)

select * from final
