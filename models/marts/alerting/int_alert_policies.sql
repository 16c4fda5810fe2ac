-- The alert policies of seed alert_policies, typed: thresholds and windows per alert kind,
-- a row per broker kind or queue ('*' for all) overriding the '*' row of its kind as a whole
-- (the lookup is the macro alert_policy_join).

with alert_policies as (
    select * from {{ ref('alert_policies') }}
),

final as (
    select
        lower({{ seed_string('alert_kind') }}) as alert_kind,
        lower(coalesce({{ seed_string('broker_kind') }}, '*')) as broker_kind,
        coalesce({{ seed_string('queue_name') }}, '*') as queue_name,
        lower({{ seed_string('severity') }}) as severity,
        cast(window_minutes as int) as window_minutes,
        cast(threshold as double) as threshold,
        cast(factor as double) as factor,
        cast(baseline_days as int) as baseline_days,
        cast(quiet_minutes as int) as quiet_minutes,
        cast(resolved_retention_hours as int) as resolved_retention_hours
    from alert_policies
)

select * from final
