-- One row per queue and snapshot: depth, age of the oldest message, poison messages in it,
-- the run of whole-transaction rollbacks and Service Broker's five-rollback disable
-- (rules.md, "Queues"). The state as of each snapshot comes from one time-ordered stream of
-- states, events and snapshot markers per queue (running window functions), not from range
-- joins; the rollback run as of each snapshot from the attempts' hours (below).

{#-
    The rollback run as of a snapshot is that of the queue's last attempt at or before it, and
    the longest run the greatest up to it. Whole hours before the snapshot's hour count as one
    row each (int_service_broker__queue_hours_summarized, kept per hour as the runs are
    rewritten); only the snapshot's own hour is read attempt by attempt, so a build neither
    orders every attempt of history with the snapshots nor groups them all by hour again.
-#}
{%- set disable_at = var('queue_disable_rollbacks') %}
{%- set partition_seconds = var('attempt_partition_seconds') %}

with snapshots as (
    select * from {{ ref('int_queue_snapshots') }}
),

runs as (
    select
        queue_key,
        attempted_at,
        queue_attempt_number,
        rollback_run,
        attempt_partition
    from {{ ref('int_service_broker__queue_rollback_runs') }}
),

queue_hours as (
    select * from {{ ref('int_service_broker__queue_hours_summarized') }}
),

states as (
    select * from {{ ref('stg_service_broker__queue_states') }}
),

disabled_events as (
    select
        queue_key,
        event_at
    from {{ ref('stg_service_broker__broker_events') }}
    where is_queue_disabled_event
),

messages_classified as (
    select * from {{ ref('int_messages_classified') }}
),

service_broker_snapshot_messages as (
    select * from {{ ref('stg_service_broker__queue_snapshots') }}
),

jms_snapshot_messages as (
    select * from {{ ref('stg_jms__queue_snapshots') }}
),

poison as (
    select message_key
    from messages_classified
    where classification = 'poison'
),

snapshot_messages as (
    {#- Both brokers' snapshot rows as (queue, snapshot, message), counted here rather than
        in a view of their own: that view's unique test would re-read every snapshot of
        history on each build to check keys its `group by` makes unique. #}
    select
        queue_key,
        snapshot_at,
        message_key
    from service_broker_snapshot_messages
    union all
    select
        queue_key,
        snapshot_at,
        {{ message_key('jms') }}
            as message_key
    from jms_snapshot_messages
),

poison_per_snapshot as (
    select
        snapshot_messages.queue_key,
        snapshot_messages.snapshot_at,
        count(distinct snapshot_messages.message_key) as poison_message_count
    from snapshot_messages
    inner join poison
        on snapshot_messages.message_key = poison.message_key
    group by snapshot_messages.queue_key, snapshot_messages.snapshot_at
),

state_at_snapshot as (
    select
        queue_key,
        snapshot_at,
        bool_or(not is_receive_enabled) as is_receive_disabled
    from states
    group by queue_key, snapshot_at
),

snapshot_hours as (
    select distinct
        queue_key,
        snapshot_at,
        {{ time_bucket('snapshot_at', partition_seconds) }} as attempt_partition
    from snapshots
    where broker_kind = 'service_broker'
),

runs_up_to_snapshot as (
    {#- Per snapshot: each hour before its own as one row (hour labels are 'yyyy-MM-dd
        HH:mm:ss', time_bucket: text order is time order), then each attempt of its own hour
        up to it. An attempt at the snapshot's very time counts: it happened before the queue
        was looked at. Joined on the partition column, but Spark does not prune the attempts'
        hours by that join (its dynamic pruning does not judge the snapshots' side selective):
        it reads every hour's attempts, not only the snapshots' hours. #}
    select
        snapshot_hours.queue_key,
        snapshot_hours.snapshot_at,
        queue_hours.attempt_partition,
        0 as queue_attempt_number,
        queue_hours.longest_rollback_run,
        queue_hours.last_rollback_run
    from snapshot_hours
    inner join queue_hours
        on
            snapshot_hours.queue_key = queue_hours.queue_key
            and snapshot_hours.attempt_partition > queue_hours.attempt_partition
    union all
    select
        snapshot_hours.queue_key,
        snapshot_hours.snapshot_at,
        runs.attempt_partition,
        runs.queue_attempt_number,
        runs.rollback_run as longest_rollback_run,
        runs.rollback_run as last_rollback_run
    from snapshot_hours
    inner join runs
        on
            snapshot_hours.queue_key = runs.queue_key
            and snapshot_hours.attempt_partition = runs.attempt_partition
            and snapshot_hours.snapshot_at >= runs.attempted_at
),

rollback_state as (
    select
        queue_key,
        snapshot_at,
        max_by(last_rollback_run, struct(attempt_partition, queue_attempt_number))
            as current_rollback_run,
        max(longest_rollback_run) as longest_rollback_run
    from runs_up_to_snapshot
    group by queue_key, snapshot_at
),

stream as (
    {#- The poison-message handling switch (ALTER QUEUE … WITH POISON_MESSAGE_HANDLING) as of
        each snapshot: the last state row that said on, and the last that said off. #}
    select
        queue_key,
        snapshot_at as event_at,
        1 as event_order,
        cast(null as timestamp) as disabled_event_at,
        case when is_receive_enabled then snapshot_at end as enabled_state_at,
        case when is_poison_message_handling_enabled then snapshot_at end as handling_on_at,
        case when not is_poison_message_handling_enabled then snapshot_at end as handling_off_at,
        false as is_snapshot_marker
    from states
    union all
    select
        queue_key,
        event_at,
        1 as event_order,
        event_at as disabled_event_at,
        cast(null as timestamp) as enabled_state_at,
        cast(null as timestamp) as handling_on_at,
        cast(null as timestamp) as handling_off_at,
        false as is_snapshot_marker
    from disabled_events
    union all
    select
        queue_key,
        snapshot_at as event_at,
        2 as event_order,
        cast(null as timestamp) as disabled_event_at,
        cast(null as timestamp) as enabled_state_at,
        cast(null as timestamp) as handling_on_at,
        cast(null as timestamp) as handling_off_at,
        true as is_snapshot_marker
    from snapshots
),

as_of as (
    select
        queue_key,
        event_at as snapshot_at,
        is_snapshot_marker,
        max(disabled_event_at) over queue_history as last_disabled_event_at,
        max(enabled_state_at) over queue_history as last_enabled_state_at,
        max(handling_on_at) over queue_history as last_handling_on_at,
        max(handling_off_at) over queue_history as last_handling_off_at
    from stream
    window queue_history as (
        partition by queue_key
        order by event_at, event_order
        rows between unbounded preceding and current row
    )
),

snapshot_state as (
    select distinct
        queue_key,
        snapshot_at,
        last_disabled_event_at,
        last_enabled_state_at,
        last_handling_on_at,
        last_handling_off_at
    from as_of
    where is_snapshot_marker
),

joined as (
    select
        snapshots.queue_snapshot_key as queue_health_key,
        snapshots.broker_kind,
        snapshots.server_name,
        snapshots.database_name,
        snapshots.broker_name,
        snapshots.queue_name,
        snapshots.snapshot_at,
        snapshots.is_latest_snapshot,
        snapshots.message_count,
        cast(
            unix_timestamp(snapshots.snapshot_at)
            - unix_timestamp(snapshots.oldest_enqueued_at) as bigint
        )
            as oldest_message_age_seconds,
        snapshot_state.last_disabled_event_at,
        snapshot_state.last_enabled_state_at,
        coalesce(poison_per_snapshot.poison_message_count, 0) as poison_message_count,
        case
            when snapshots.broker_kind = 'service_broker'
                then coalesce(rollback_state.current_rollback_run, 0)
        end as current_rollback_run,
        case
            when snapshots.broker_kind = 'service_broker'
                then coalesce(rollback_state.longest_rollback_run, 0)
        end as longest_rollback_run,
        coalesce(state_at_snapshot.is_receive_disabled, false) as is_state_disabled,
        {#- On unless a state row said off and no later one said on (Service Broker's default);
            null for JMS queues. #}
        case
            when snapshots.broker_kind = 'service_broker'
                then not coalesce(
                    snapshot_state.last_handling_off_at
                    > coalesce(snapshot_state.last_handling_on_at, timestamp '1900-01-01'),
                    false
                )
        end as is_poison_message_handling_enabled,
        snapshots.broker_kind = 'service_broker'
        and (
            coalesce(state_at_snapshot.is_receive_disabled, false)
            or (
                snapshot_state.last_disabled_event_at is not null
                and not coalesce(
                    snapshot_state.last_enabled_state_at > snapshot_state.last_disabled_event_at,
                    false
                )
            )
        ) as is_observed_disabled
    from snapshots
    left join snapshot_state
        on
            snapshots.queue_key = snapshot_state.queue_key
            and snapshots.snapshot_at = snapshot_state.snapshot_at
    left join rollback_state
        on
            snapshots.queue_key = rollback_state.queue_key
            and snapshots.snapshot_at = rollback_state.snapshot_at
    left join state_at_snapshot
        on
            snapshots.queue_key = state_at_snapshot.queue_key
            and snapshots.snapshot_at = state_at_snapshot.snapshot_at
    left join poison_per_snapshot
        on
            snapshots.queue_key = poison_per_snapshot.queue_key
            and snapshots.snapshot_at = poison_per_snapshot.snapshot_at
)

select
    queue_health_key,
    broker_kind,
    server_name,
    database_name,
    broker_name,
    queue_name,
    snapshot_at,
    is_latest_snapshot,
    message_count,
    oldest_message_age_seconds,
    poison_message_count,
    current_rollback_run,
    longest_rollback_run,
    is_poison_message_handling_enabled,
    {#- With poison-message handling off Service Broker never disables the queue: a poison
        message is received and rolled back forever (seed 004). #}
    case
        when broker_kind <> 'service_broker' then null
        when not is_poison_message_handling_enabled then 'loops_forever_risk'
        when current_rollback_run >= {{ disable_at }} then 'disabled'
        when current_rollback_run = {{ disable_at }} - 1 then 'at_risk'
        else 'ok'
    end as disable_risk,
    last_disabled_event_at,
    last_enabled_state_at,
    is_state_disabled,
    is_observed_disabled,
    is_observed_disabled
    or coalesce(
        is_poison_message_handling_enabled and current_rollback_run >= {{ disable_at }}, false
    )
        as is_disabled
from joined
