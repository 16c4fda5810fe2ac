-- One row per open, quiet or recently resolved alert incident. The alerts of one kind and
-- subject (int_alerts_unioned) belong to one incident while each fires again within the
-- quiet period of its policy (seed alert_policies, quiet_minutes) after the one before: a
-- flapping queue is one incident, not an alert per firing. An incident is open while its
-- latest alert is, quiet after that until the clock (data time, int_alert_clock) has passed
-- its last firing by the quiet period, resolved from then on; a resolved incident is kept
-- for the policy's resolved_retention_hours. Its owner is the most specific row of seed
-- alert_owners. `poisonwatch alerts --webhook` posts an incident when it opens, when its
-- severity changes and when it resolves, once each.

{%- set subject = [
    'alert_kind', 'broker_kind', 'server_name', 'database_name', 'broker_name', 'queue_name',
    'consumer_id', 'failure_group_id',
] %}

with alerts as (
    select * from {{ ref('int_alerts_unioned') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

owners as (
    select * from {{ ref('int_alert_owners') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

alerts_with_policies_ranked as (
    select
        alerts.*,
        policies.quiet_minutes,
        {{ alert_policy_rank('policies', ['alerts.alert_id']) }} as policy_rank
    from alerts
    {{ alert_policy_join(
        'policies', 'alerts.alert_kind', 'alerts.broker_kind', 'alerts.queue_name'
    ) }}
),

alerts_with_quiet_minutes as (
    select * from alerts_with_policies_ranked
    where policy_rank = 1
),

{# An alert opens an incident when the subject's alert before it was last seen at least the
   quiet period before it first fired; the running count of openings numbers the incidents. #}
alerts_with_previous as (
    select
        *,
        lag(last_seen_at) over (
            partition by {{ subject | join(', ') }}
            order by first_seen_at
        ) as previous_last_seen_at
    from alerts_with_quiet_minutes
),

alerts_sequenced as (
    select
        *,
        case
            when
                previous_last_seen_at
                > first_seen_at - make_interval(0, 0, 0, 0, 0, quiet_minutes, 0)
                then 0
            else 1
        end as is_incident_start
    from alerts_with_previous
),

alerts_numbered as (
    select
        *,
        sum(is_incident_start) over (
            partition by {{ subject | join(', ') }}
            order by first_seen_at
            rows between unbounded preceding and current row
        ) as incident_number
    from alerts_sequenced
),

incidents as (
    select
        {{ subject | join(',\n        ') }},
        min(first_seen_at) as first_seen_at,
        max(last_seen_at) as last_seen_at,
        count(*) as alert_count,
        max_by(alert_id, first_seen_at) as latest_alert_id,
        max_by(status, first_seen_at) as latest_alert_status,
        max_by(severity, first_seen_at) as severity,
        max_by(observed_value, first_seen_at) as observed_value,
        max_by(threshold, first_seen_at) as threshold,
        max_by(detail, first_seen_at) as detail,
        max_by(quiet_minutes, first_seen_at) as quiet_minutes,
        max_by(resolved_retention_hours, first_seen_at) as resolved_retention_hours
    from alerts_numbered
    group by {{ subject | join(', ') }}, incident_number
),

incidents_with_status as (
    select
        {{ surrogate_key(subject + ['first_seen_at']) }} as incident_id,
        incidents.*,
        case
            when incidents.latest_alert_status = 'open' then 'open'
            when
                clock.as_of
                < incidents.last_seen_at
                + make_interval(0, 0, 0, 0, 0, incidents.quiet_minutes, 0)
                then 'quiet'
            else 'resolved'
        end as status,
        clock.as_of as evaluated_at
    from incidents
    cross join clock
),

incidents_with_owners_ranked as (
    select
        incidents_with_status.*,
        owners.owner_team,
        owners.owner_channel,
        coalesce(
            incidents_with_status.consumer_id,
            incidents_with_status.queue_name,
            incidents_with_status.failure_group_id
        ) as subject,
        case
            when incidents_with_status.status = 'resolved'
                then
                    incidents_with_status.last_seen_at
                    + make_interval(0, 0, 0, 0, 0, incidents_with_status.quiet_minutes, 0)
        end as resolved_at,
        row_number() over (
            partition by incidents_with_status.incident_id
            order by
                case when owners.consumer_id = '*' then 1 else 0 end,
                case when owners.queue_name = '*' then 1 else 0 end,
                case when owners.broker_kind = '*' then 1 else 0 end
        ) as owner_rank
    from incidents_with_status
    left join owners
        on
            owners.broker_kind in (incidents_with_status.broker_kind, '*')
            and owners.queue_name in (incidents_with_status.queue_name, '*')
            and owners.consumer_id in (incidents_with_status.consumer_id, '*')
),

final as (
    select
        incident_id,
        alert_kind,
        severity,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        consumer_id,
        failure_group_id,
        subject,
        first_seen_at,
        last_seen_at,
        resolved_at,
        status,
        alert_count,
        latest_alert_id,
        observed_value,
        threshold,
        detail,
        quiet_minutes,
        owner_team,
        owner_channel,
        evaluated_at
    from incidents_with_owners_ranked
    where
        owner_rank = 1
        and (
            status != 'resolved'
            or last_seen_at + make_interval(0, 0, 0, 0, 0, quiet_minutes, 0)
            >= evaluated_at - make_interval(0, 0, 0, 0, resolved_retention_hours, 0, 0)
        )
)

select * from final
