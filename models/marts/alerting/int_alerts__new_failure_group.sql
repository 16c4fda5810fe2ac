-- new_failure_group: a failure group (failure_groups) first seen within the lookback with at
-- least the threshold failures; open while its first failure is within window_minutes of the
-- clock. A group seen in the first window of the history is not new: history began there.

with failure_groups as (
    select * from {{ ref('failure_groups') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

history_start as (
    select min(first_seen_at) as started_at from failure_groups
),

groups as (
    select
        failure_groups.*,
        'new_failure_group' as alert_kind
    from failure_groups
),

groups_with_policies as (
    select
        groups.*,
        policies.severity,
        policies.window_minutes,
        policies.threshold,
        policies.resolved_retention_hours,
        {{ alert_policy_rank('policies', ['groups.failure_group_id']) }} as policy_rank
    from groups
    {{ alert_policy_join(
        'policies', 'groups.alert_kind', 'groups.broker_kind', none
    ) }}
),

groups_with_policy as (
    select *
    from groups_with_policies
    where policy_rank = 1
),

alerts as (
    select
        groups_with_policy.alert_kind,
        groups_with_policy.severity,
        groups_with_policy.broker_kind,
        groups_with_policy.failure_group_id,
        groups_with_policy.first_seen_at,
        groups_with_policy.last_seen_at,
        groups_with_policy.threshold,
        groups_with_policy.resolved_retention_hours,
        cast(groups_with_policy.failure_count as double) as observed_value,
        case
            when
                groups_with_policy.first_seen_at
                > clock.as_of - make_interval(0, 0, 0, 0, 0, groups_with_policy.window_minutes, 0)
                then 'open'
            else 'resolved'
        end as status,
        concat(
            'error ', groups_with_policy.error_key, ': ',
            left(groups_with_policy.normalized_message, 120)
        ) as detail
    from groups_with_policy
    cross join clock
    cross join history_start
    where
        groups_with_policy.failure_count >= groups_with_policy.threshold
        and groups_with_policy.first_seen_at
        >= history_start.started_at
        + make_interval(0, 0, 0, 0, 0, groups_with_policy.window_minutes, 0)
        and groups_with_policy.first_seen_at >= clock.lookback_start
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'failure_group_id', 'first_seen_at',
            'last_seen_at', 'status', 'observed_value', 'threshold', 'detail',
            'resolved_retention_hours',
        ], grain='alert') }}
    from alerts
)

select * from final
