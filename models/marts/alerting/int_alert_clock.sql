-- The alerts' clock (one row): every rule is evaluated in data time, never the wall clock,
-- so the same data gives the same alerts. `as_of` is the latest queue snapshot or receive
-- attempt seen; only the var('alert_lookback_hours') before it are evaluated.

{%- set lookback_hours = var('alert_lookback_hours') | int %}

with queue_health as (
    select * from {{ ref('queue_health') }}
),

receive_attempts_bucketed as (
    select * from {{ ref('int_receive_attempts_bucketed') }}
),

latest_snapshot as (
    select max(snapshot_at) as latest_at from queue_health
),

latest_attempt as (
    select max(last_attempted_at) as latest_at from receive_attempts_bucketed
),

clock as (
    select greatest(latest_snapshot.latest_at, latest_attempt.latest_at) as as_of
    from latest_snapshot
    cross join latest_attempt
),

final as (
    select
        as_of,
        as_of - make_interval(0, 0, 0, 0, {{ lookback_hours }}, 0, 0) as lookback_start
    from clock
)

select * from final
