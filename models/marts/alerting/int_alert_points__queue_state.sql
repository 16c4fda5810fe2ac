-- Service Broker queue state at each snapshot of the lookback: queue_disabled (observed, or
-- predicted from the rollbacks in a row) and queue_disable_imminent (threshold rollbacks in a
-- row, fewer than var('queue_disable_rollbacks'), queue not yet disabled: one more and Service
-- Broker switches the queue off), one point per kind and snapshot; and queue_loops_forever (a
-- queue with poison-message handling off holds at least threshold poison messages: it is never
-- disabled, they are received and rolled back forever), a point per snapshot of such a queue.

{%- set disable_at = var('queue_disable_rollbacks') %}

with queue_health as (
    select * from {{ ref('queue_health') }}
),

clock as (
    select * from {{ ref('int_alert_clock') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

snapshots as (
    select queue_health.*
    from queue_health
    cross join clock
    where
        queue_health.broker_kind = 'service_broker'
        and queue_health.snapshot_at >= clock.lookback_start
),

points as (
    select
        'queue_disabled' as alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        snapshot_at as point_at,
        current_rollback_run,
        poison_message_count,
        is_disabled,
        case
            when is_observed_disabled
                then 'observed disabled (is_receive_enabled false or a BROKER_QUEUE_DISABLED event)'
            else concat(
                'predicted disabled: ', current_rollback_run,
                ' whole-transaction rollbacks in a row'
            )
        end as detail
    from snapshots
    union all
    select
        'queue_disable_imminent' as alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        snapshot_at as point_at,
        current_rollback_run,
        poison_message_count,
        is_disabled,
        concat(
            current_rollback_run,
            ' whole-transaction rollbacks in a row: Service Broker disables the queue at ',
            {{ disable_at }}
        ) as detail
    from snapshots
    union all
    select
        'queue_loops_forever' as alert_kind,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        snapshot_at as point_at,
        current_rollback_run,
        poison_message_count,
        is_disabled,
        concat(
            poison_message_count,
            ' poison message(s) in a queue with POISON_MESSAGE_HANDLING (STATUS = OFF): ',
            'Service Broker never disables it, each is received and rolled back forever'
        ) as detail
    from snapshots
    where not is_poison_message_handling_enabled
),

points_with_policies as (
    select
        points.*,
        policies.severity,
        policies.threshold,
        policies.resolved_retention_hours,
        {{ alert_policy_rank('policies', [
            'points.alert_kind', 'points.broker_kind', 'points.server_name',
            'points.database_name', 'points.broker_name', 'points.queue_name', 'points.point_at',
        ]) }} as policy_rank
    from points
    {{ alert_policy_join(
        'policies', 'points.alert_kind', 'points.broker_kind', 'points.queue_name'
    ) }}
),

points_with_policy as (
    select *
    from points_with_policies
    where policy_rank = 1
),

evaluated as (
    select
        alert_kind,
        severity,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        point_at,
        case alert_kind
            when 'queue_disable_imminent'
                then
                    current_rollback_run >= threshold
                    and current_rollback_run < {{ disable_at }}
                    and not is_disabled
            when 'queue_loops_forever' then poison_message_count >= threshold
            else is_disabled
        end as is_firing,
        cast(
            case alert_kind
                when 'queue_loops_forever' then poison_message_count
                else current_rollback_run
            end as double
        ) as observed_value,
        threshold,
        detail,
        resolved_retention_hours
    from points_with_policy
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'server_name', 'database_name',
            'broker_name', 'queue_name', 'point_at', 'is_firing', 'observed_value',
            'threshold', 'detail', 'resolved_retention_hours',
        ], grain='point') }}
    from evaluated
)

select * from final
