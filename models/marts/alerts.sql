-- One row per open or recently resolved alert: what needs a person now (issue 18). Every
-- kind is evaluated at points in data time (queue snapshots; for breakers and failure groups
-- their own times), never the wall clock, so the same data gives the same alerts. The clock
-- `as_of` is the latest snapshot or attempt seen. Consecutive firing points of one kind and
-- subject form one alert (gaps and islands); it is open while it fires at the subject's
-- latest point, resolved after, and kept for resolved_retention_hours. alert_id is the hash
-- of kind, subject and first_seen_at: a subject that resolves and fires anew gets a new id.
-- Thresholds and windows: seed alert_policies.csv (a row for the queue overrides the '*' row
-- of its kind as a whole). Only the last var('alert_lookback_hours') of data are evaluated.

{%- set disable_at = var('queue_disable_rollbacks', 5) %}
{%- set lookback_hours = var('alert_lookback_hours', 192) | int %}

with health as (
    select
        *,
        case
            when broker_kind = 'jms' then {{ queue_key('jms') }}
            else {{ queue_key('service_broker') }}
        end as queue_key
    from {{ ref('queue_health') }}
),

buckets as (
    select * from {{ ref('int_receive_attempts_bucketed') }}
),

latest_snapshot as (
    select max(snapshot_at) as latest_at from health
),

latest_attempt as (
    select max(last_attempted_at) as latest_at from buckets
),

clock as (
    select greatest(latest_snapshot.latest_at, latest_attempt.latest_at) as as_of
    from latest_snapshot
    cross join latest_attempt
),

horizon as (
    select
        as_of,
        as_of - make_interval(0, 0, 0, 0, {{ lookback_hours }}, 0, 0) as lookback_start
    from clock
),

policy_rows as (
    select
        lower({{ seed_string('alert_kind') }}) as alert_kind,
        lower(coalesce({{ seed_string('broker_kind') }}, '*')) as broker_kind,
        coalesce({{ seed_string('queue_name') }}, '*') as queue_name,
        lower({{ seed_string('severity') }}) as severity,
        cast(window_minutes as int) as window_minutes,
        cast(threshold as double) as threshold,
        cast(factor as double) as factor,
        cast(baseline_days as int) as baseline_days,
        cast(resolved_retention_hours as int) as resolved_retention_hours
    from {{ ref('alert_policies') }}
),

recent_health as (
    select health.*
    from health
    cross join horizon
    where health.snapshot_at >= horizon.lookback_start
),

{# ---------------------------------------------------------------- Service Broker state #}
disable_points as (
    select
        'queue_disabled' as alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        cast(null as string) as consumer_id,
        cast(null as string) as failure_group_id,
        snapshot_at as point_at,
        is_disabled as is_firing,
        cast(current_rollback_run as double) as observed_value,
        cast(null as double) as baseline_value,
        case
            when is_observed_disabled
                then 'observed disabled (is_receive_enabled false or a BROKER_QUEUE_DISABLED event)'
            else concat(
                'predicted disabled: ', current_rollback_run,
                ' whole-transaction rollbacks in a row'
            )
        end as detail
    from recent_health
    where broker_kind = 'service_broker'
),

imminent_points as (
    select
        'queue_disable_imminent' as alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        cast(null as string) as consumer_id,
        cast(null as string) as failure_group_id,
        snapshot_at as point_at,
        current_rollback_run,
        is_disabled,
        cast(current_rollback_run as double) as observed_value,
        cast(null as double) as baseline_value,
        concat(
            current_rollback_run,
            ' whole-transaction rollbacks in a row: Service Broker disables the queue at ',
            {{ disable_at }}
        ) as detail
    from recent_health
    where broker_kind = 'service_broker'
),

{# ---------------------------------------------------------------- stalled queues #}
{#
    One stream per queue of snapshot markers and success times (the first and the last of
    each minute), so the latest success at or before each snapshot is a running max.
#}
success_times as (
    select
        buckets.queue_key,
        explode(array(buckets.first_succeeded_at, buckets.last_succeeded_at)) as success_at
    from buckets
    cross join horizon
    where
        buckets.success_count > 0
        and buckets.bucket_start >= horizon.lookback_start - interval 1 day
),

stall_stream as (
    select
        queue_key,
        snapshot_at as event_at,
        1 as event_order,
        cast(null as timestamp) as success_at,
        snapshot_at
    from recent_health
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

stall_points as (
    select
        'queue_stalled' as alert_kind,
        recent_health.broker_kind,
        recent_health.server_name,
        recent_health.database_name,
        recent_health.broker_name,
        recent_health.queue_name,
        cast(null as string) as consumer_id,
        cast(null as string) as failure_group_id,
        recent_health.snapshot_at as point_at,
        recent_health.message_count,
        recent_health.oldest_message_age_seconds,
        last_successes.last_success_at,
        lag(recent_health.message_count) over queue_snapshots as previous_message_count,
        lag(recent_health.oldest_message_age_seconds) over queue_snapshots
            as previous_oldest_message_age_seconds
    from recent_health
    left join last_successes
        on
            recent_health.queue_key = last_successes.queue_key
            and recent_health.snapshot_at = last_successes.snapshot_at
    where
        not (
            recent_health.broker_kind = 'jms'
            and recent_health.queue_name rlike '{{ var("dlq_queue_pattern") }}'
        )
    window queue_snapshots as (
        partition by recent_health.queue_key
        order by recent_health.snapshot_at
    )
),

{# ---------------------------------------------------------------- DLQ arrival spikes #}
{#
    Dead-letter arrivals per original queue, counted in windows aligned to the clock (every
    window_minutes from midnight UTC); the baseline is the median count of the same window on
    each of the baseline_days days before (a day without arrivals counts 0).
-#}
arrivals as (
    select
        dlq_messages.broker_name,
        dlq_messages.orig_queue as queue_name,
        dlq_messages.first_seen_at as arrived_at
    from {{ ref('dlq_messages') }} as dlq_messages
    cross join horizon
    where
        dlq_messages.broker_kind = 'jms'
        and (dlq_messages.is_in_dlq_snapshot or dlq_messages.is_dead_lettered_by_apply)
        and dlq_messages.first_seen_at >= horizon.lookback_start
        and dlq_messages.first_seen_at <= horizon.as_of
),

arrival_queues as (
    select distinct
        broker_name,
        queue_name
    from arrivals
),

dlq_policies as (
    select
        arrival_queues.broker_name,
        arrival_queues.queue_name,
        policy_rows.window_minutes,
        policy_rows.baseline_days,
        policy_rows.threshold,
        policy_rows.factor
    from arrival_queues
    inner join policy_rows
        on
            policy_rows.alert_kind = 'dlq_arrival_spike'
            and policy_rows.broker_kind in ('jms', '*')
            and policy_rows.queue_name in (arrival_queues.queue_name, '*')
    qualify row_number() over (
        partition by arrival_queues.broker_name, arrival_queues.queue_name
        order by
            case when policy_rows.queue_name = '*' then 1 else 0 end,
            case when policy_rows.broker_kind = '*' then 1 else 0 end
    ) = 1
),

arrival_windows as (
    select
        arrivals.broker_name,
        arrivals.queue_name,
        arrivals.arrived_at,
        floor(unix_seconds(arrivals.arrived_at) / (dlq_policies.window_minutes * 60))
            as window_number
    from arrivals
    inner join dlq_policies
        on
            arrivals.broker_name = dlq_policies.broker_name
            and arrivals.queue_name = dlq_policies.queue_name
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
        broker_name,
        snapshot_at
    from recent_health
    where broker_kind = 'jms'
),

dlq_eval as (
    select
        dlq_policies.*,
        broker_snapshots.snapshot_at,
        floor(unix_seconds(broker_snapshots.snapshot_at) / (dlq_policies.window_minutes * 60))
            as window_number
    from dlq_policies
    inner join broker_snapshots
        on dlq_policies.broker_name = broker_snapshots.broker_name
),

dlq_current as (
    select
        dlq_eval.broker_name,
        dlq_eval.queue_name,
        dlq_eval.snapshot_at,
        count(arrival_windows.arrived_at) as arrival_count
    from dlq_eval
    left join arrival_windows
        on
            dlq_eval.broker_name = arrival_windows.broker_name
            and dlq_eval.queue_name = arrival_windows.queue_name
            and dlq_eval.window_number = arrival_windows.window_number
            and dlq_eval.snapshot_at >= arrival_windows.arrived_at
    group by dlq_eval.broker_name, dlq_eval.queue_name, dlq_eval.snapshot_at
),

dlq_baseline as (
    select
        back_days.broker_name,
        back_days.queue_name,
        back_days.snapshot_at,
        percentile(coalesce(window_counts.arrival_count, 0), 0.5) as baseline_count
    from (
        select
            dlq_eval.*,
            explode(sequence(1, dlq_eval.baseline_days)) as days_back
        from dlq_eval
    ) as back_days
    left join window_counts
        on
            back_days.broker_name = window_counts.broker_name
            and back_days.queue_name = window_counts.queue_name
            and back_days.window_number - back_days.days_back * (1440 / back_days.window_minutes)
            = window_counts.window_number
    group by back_days.broker_name, back_days.queue_name, back_days.snapshot_at
),

dlq_points as (
    select
        'dlq_arrival_spike' as alert_kind,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        dlq_eval.broker_name,
        dlq_eval.queue_name,
        cast(null as string) as consumer_id,
        cast(null as string) as failure_group_id,
        dlq_eval.snapshot_at as point_at,
        dlq_current.arrival_count >= greatest(
            dlq_eval.threshold, coalesce(dlq_eval.factor, 1.0) * dlq_baseline.baseline_count
        ) as is_firing,
        cast(dlq_current.arrival_count as double) as observed_value,
        cast(dlq_baseline.baseline_count as double) as baseline_value,
        concat(
            dlq_current.arrival_count, ' dead-letter arrivals in the ', dlq_eval.window_minutes,
            '-minute window; baseline (median of the previous ', dlq_eval.baseline_days,
            ' days) ', dlq_baseline.baseline_count
        ) as detail
    from dlq_eval
    inner join dlq_current
        on
            dlq_eval.broker_name = dlq_current.broker_name
            and dlq_eval.queue_name = dlq_current.queue_name
            and dlq_eval.snapshot_at = dlq_current.snapshot_at
    inner join dlq_baseline
        on
            dlq_eval.broker_name = dlq_baseline.broker_name
            and dlq_eval.queue_name = dlq_baseline.queue_name
            and dlq_eval.snapshot_at = dlq_baseline.snapshot_at
),

{# ---------------------------------------------------------------- queue-level policies #}
queue_points as (
    select
        disable_points.*,
        cast(null as bigint) as message_count,
        cast(null as bigint) as oldest_message_age_seconds,
        cast(null as bigint) as previous_message_count,
        cast(null as bigint) as previous_oldest_message_age_seconds,
        cast(null as timestamp) as last_success_at,
        cast(null as bigint) as current_rollback_run,
        cast(null as boolean) as is_disabled
    from disable_points
    union all
    select
        alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        consumer_id,
        failure_group_id,
        point_at,
        cast(null as boolean) as is_firing,
        observed_value,
        baseline_value,
        detail,
        cast(null as bigint) as message_count,
        cast(null as bigint) as oldest_message_age_seconds,
        cast(null as bigint) as previous_message_count,
        cast(null as bigint) as previous_oldest_message_age_seconds,
        cast(null as timestamp) as last_success_at,
        current_rollback_run,
        is_disabled
    from imminent_points
    union all
    select
        alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        consumer_id,
        failure_group_id,
        point_at,
        cast(null as boolean) as is_firing,
        cast(message_count as double) as observed_value,
        cast(null as double) as baseline_value,
        cast(null as string) as detail,
        message_count,
        oldest_message_age_seconds,
        previous_message_count,
        previous_oldest_message_age_seconds,
        last_success_at,
        cast(null as bigint) as current_rollback_run,
        cast(null as boolean) as is_disabled
    from stall_points
    union all
    select
        dlq_points.*,
        cast(null as bigint) as message_count,
        cast(null as bigint) as oldest_message_age_seconds,
        cast(null as bigint) as previous_message_count,
        cast(null as bigint) as previous_oldest_message_age_seconds,
        cast(null as timestamp) as last_success_at,
        cast(null as bigint) as current_rollback_run,
        cast(null as boolean) as is_disabled
    from dlq_points
),

queue_point_policies as (
    select
        queue_points.*,
        policy_rows.severity,
        policy_rows.window_minutes,
        policy_rows.threshold,
        policy_rows.resolved_retention_hours
    from queue_points
    inner join policy_rows
        on
            queue_points.alert_kind = policy_rows.alert_kind
            and policy_rows.broker_kind in (queue_points.broker_kind, '*')
            and policy_rows.queue_name in (queue_points.queue_name, '*')
    qualify row_number() over (
        partition by
            queue_points.alert_kind,
            queue_points.broker_kind,
            queue_points.server_name,
            queue_points.database_name,
            queue_points.broker_name,
            queue_points.queue_name,
            queue_points.point_at
        order by
            case when policy_rows.queue_name = '*' then 1 else 0 end,
            case when policy_rows.broker_kind = '*' then 1 else 0 end
    ) = 1
),

evaluated_points as (
    select
        alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        consumer_id,
        failure_group_id,
        point_at,
        severity,
        threshold,
        resolved_retention_hours,
        observed_value,
        baseline_value,
        case alert_kind
            when 'queue_disable_imminent'
                then
                    current_rollback_run >= threshold
                    and current_rollback_run < {{ disable_at }}
                    and not is_disabled
            when 'queue_stalled'
                then
                    message_count >= threshold
                    and (
                        message_count > previous_message_count
                        or oldest_message_age_seconds > previous_oldest_message_age_seconds
                    )
                    and coalesce(
                        last_success_at
                        <= point_at - make_interval(0, 0, 0, 0, 0, window_minutes, 0),
                        true
                    )
            else is_firing
        end as is_firing,
        case
            when alert_kind = 'queue_stalled'
                then concat(
                    message_count, ' messages, oldest ', oldest_message_age_seconds,
                    ' s old (previous snapshot: ', coalesce(previous_message_count, 0),
                    ' messages); last successful receive: ',
                    coalesce(cast(last_success_at as string), 'none'),
                    '; none within ', window_minutes, ' minutes'
                )
            else detail
        end as detail
    from queue_point_policies
),

episodes as (
    select
        *,
        sum(case when is_firing then 0 else 1 end) over (
            partition by
                alert_kind, broker_kind, server_name, database_name, broker_name, queue_name
            order by point_at
            rows between unbounded preceding and current row
        ) as quiet_points_before,
        max(point_at) over (
            partition by
                alert_kind, broker_kind, server_name, database_name, broker_name, queue_name
        ) as latest_point_at
    from evaluated_points
),

queue_alerts as (
    select
        alert_kind,
        max(severity) as severity,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
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
    group by
        alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        quiet_points_before
),

{# ---------------------------------------------------------------- breakers #}
breaker_policy as (
    select *
    from policy_rows
    where alert_kind = 'breaker_tripped_still_receiving'
    qualify row_number() over (
        order by
            case when queue_name = '*' then 1 else 0 end,
            case when broker_kind = '*' then 1 else 0 end
    ) = 1
),

breakers as (
    select * from {{ ref('consumer_circuit_breakers') }}
    where is_self_tripped
),

runs as (
    select
        runs.consumer_id,
        runs.server_name,
        runs.attempted_at,
        runs.same_type_run,
        runs.any_type_run
    from {{ ref('int_jms__consumer_failure_runs') }} as runs
    left semi join breakers
        on runs.consumer_id = breakers.consumer_id
),

server_reports as (
    select
        runs.consumer_id,
        runs.server_name,
        min(runs.attempted_at) as reported_at
    from runs
    inner join breakers
        on runs.consumer_id = breakers.consumer_id
    where {{ breaker_server_reports(
        'runs.same_type_run', 'runs.any_type_run', 'breakers.max_consecutive_failures'
    ) }}
    group by runs.consumer_id, runs.server_name
),

trips as (
    select
        server_reports.consumer_id,
        element_at(
            array_sort(collect_list(server_reports.reported_at)),
            {{ breaker_reports_needed('max(breakers.breaker_mode)') }}
        ) as tripped_at
    from server_reports
    inner join breakers
        on server_reports.consumer_id = breakers.consumer_id
    group by server_reports.consumer_id
),

after_trip as (
    select
        trips.consumer_id,
        trips.tripped_at,
        count(*) as attempts_after_trip,
        min(runs.attempted_at) as first_after_at,
        max(runs.attempted_at) as last_after_at
    from trips
    inner join runs
        on
            trips.consumer_id = runs.consumer_id
            and trips.tripped_at < runs.attempted_at
    group by trips.consumer_id, trips.tripped_at
),

breaker_alerts as (
    select
        'breaker_tripped_still_receiving' as alert_kind,
        breaker_policy.severity,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        after_trip.consumer_id,
        cast(null as string) as failure_group_id,
        after_trip.first_after_at as first_seen_at,
        after_trip.last_after_at as last_seen_at,
        case when breakers.is_disabled_by_apply then 'resolved' else 'open' end as status,
        cast(after_trip.attempts_after_trip as double) as observed_value,
        cast(null as double) as baseline_value,
        breaker_policy.threshold,
        concat(
            'tripped at ', cast(after_trip.tripped_at as string), ' (', breakers.trip_reason,
            '); ', after_trip.attempts_after_trip, ' attempts since'
        ) as detail,
        breaker_policy.resolved_retention_hours
    from after_trip
    inner join breakers
        on after_trip.consumer_id = breakers.consumer_id
    cross join breaker_policy
    where after_trip.attempts_after_trip >= breaker_policy.threshold
),

{# ---------------------------------------------------------------- failure groups #}
group_policy as (
    select *
    from policy_rows
    where alert_kind = 'new_failure_group'
    qualify row_number() over (
        order by
            case when queue_name = '*' then 1 else 0 end,
            case when broker_kind = '*' then 1 else 0 end
    ) = 1
),

history_start as (
    select min(first_seen_at) as started_at from {{ ref('failure_groups') }}
),

group_alerts as (
    select
        'new_failure_group' as alert_kind,
        group_policy.severity,
        failure_groups.broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        cast(null as string) as consumer_id,
        failure_groups.failure_group_id,
        failure_groups.first_seen_at,
        failure_groups.last_seen_at,
        case
            when
                failure_groups.first_seen_at
                > horizon.as_of - make_interval(0, 0, 0, 0, 0, group_policy.window_minutes, 0)
                then 'open'
            else 'resolved'
        end as status,
        cast(failure_groups.failure_count as double) as observed_value,
        cast(null as double) as baseline_value,
        group_policy.threshold,
        concat(
            'error ', failure_groups.error_key, ': ', left(failure_groups.normalized_message, 120)
        ) as detail,
        group_policy.resolved_retention_hours
    from {{ ref('failure_groups') }} as failure_groups
    cross join group_policy
    cross join horizon
    cross join history_start
    where
        failure_groups.failure_count >= group_policy.threshold
        {# A group seen in the first window of the history is not new: history began. #}
        and failure_groups.first_seen_at
        >= history_start.started_at
        + make_interval(0, 0, 0, 0, 0, group_policy.window_minutes, 0)
        and failure_groups.first_seen_at >= horizon.lookback_start
),

all_alerts as (
    select * from queue_alerts
    union all
    select * from breaker_alerts
    union all
    select * from group_alerts
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
        horizon.as_of as evaluated_at
    from all_alerts
    cross join horizon
    where
        all_alerts.status = 'open'
        or all_alerts.last_seen_at
        >= horizon.as_of - make_interval(0, 0, 0, 0, all_alerts.resolved_retention_hours, 0, 0)
)

select * from final
