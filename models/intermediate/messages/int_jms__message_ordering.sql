{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
    )
}}

-- Per JMS message that failed or was redelivered, whether it was processed out of order (seed
-- 002: "ordering is broken then"): a message of the same queue first delivered after it was
-- acknowledged before it was (or while it still is not).

{#-
    A full refresh orders every message of a queue by first delivery, once (a window replaces
    a self-join). An incremental run recomputes only the partitions of the rows a run can
    change, and reads the order of history as one minimum per queue and hour:
    - the partitions int_jms__messages_summarized rewrote since the last run (their messages
      may have failed or been redelivered since), and
    - the partitions of rows whose answer (first_later_message_acknowledged_at) is none yet,
      or not before the earliest time a message changed since then can alter
      (ordering_affected_from_at of its queue's changed messages). An answer before that
      time is the acknowledgement of a message that did not change, and no change can go
      below its affected-from time, so it stands.
    For a recomputed row, the first later acknowledgement is the earlier of the first
    acknowledgement of later hours (per queue and hour of first delivery, one row each) and
    that of the messages after it in its own hour (a window over the hours of recomputed rows
    only), so a run sorts the messages of the recomputed hours, not every message of history.
    Its data tests check every row: the rows a run recomputes for a threshold keep their
    `sequenced_at`, so no stamp tells them (a small table: failed or redelivered messages).
#}
with messages as (
    select * from {{ ref('int_jms__messages_summarized') }}
),

{% if is_incremental() %}
    changed_messages as (
        select
            broker_name,
            queue_name,
            ordering_changed_at,
            ordering_affected_from_at,
            message_partition
        from messages
        {{ changed_partitions_filter(
            ref('int_jms__messages_summarized'), 'message_partition', 'sequenced_at', true
        ) }}
    ),

    queue_changes as (
        select
            broker_name,
            queue_name,
            min(ordering_affected_from_at) as affected_from_at
        from changed_messages
        where
            ordering_changed_at > {{ changed_since_bound('sequenced_at') }}
            and ordering_affected_from_at is not null
        group by broker_name, queue_name
    ),

    recomputed_partitions as (
        select message_partition from changed_messages
        union
        select previous_rows.message_partition
        from {{ this }} as previous_rows
        inner join queue_changes
            on
                previous_rows.broker_name = queue_changes.broker_name
                and previous_rows.queue_name = queue_changes.queue_name
        where
            previous_rows.first_later_message_acknowledged_at is null
            or previous_rows.first_later_message_acknowledged_at >= queue_changes.affected_from_at
    ),

    recomputed_messages as (
        select * from messages
        where
            message_partition in (
                select recomputed_partitions.message_partition from recomputed_partitions
            )
            and (failure_count > 0 or redelivered_count > 0)
    ),

    hours_acknowledged as (
        {#- Per queue and hour of first delivery, its first acknowledgement. #}
        select
            broker_name,
            queue_name,
            date_trunc('hour', first_attempted_at) as first_attempted_hour,
            min(acknowledged_at) as acknowledged_at
        from messages
        group by broker_name, queue_name, date_trunc('hour', first_attempted_at)
    ),

    later_hours_acknowledged as (
        select
            broker_name,
            queue_name,
            first_attempted_hour,
            min(acknowledged_at) over (
                partition by broker_name, queue_name
                order by first_attempted_hour desc
                rows between unbounded preceding and 1 preceding
            ) as later_hours_acknowledged_at
        from hours_acknowledged
    ),

    recomputed_hours as (
        select distinct
            broker_name,
            queue_name,
            date_trunc('hour', first_attempted_at) as first_attempted_hour
        from recomputed_messages
    ),

    same_hour_overtaken as (
        {#- Every message of those hours takes part; only the recomputed ones are kept below. #}
        select
            messages.message_key,
            recomputed_hours.first_attempted_hour,
            min(messages.acknowledged_at) over (
                partition by
                    messages.broker_name,
                    messages.queue_name,
                    recomputed_hours.first_attempted_hour
                order by messages.first_attempted_at desc, messages.message_key desc
                rows between unbounded preceding and 1 preceding
            ) as later_in_hour_acknowledged_at
        from messages
        inner join recomputed_hours
            on
                messages.broker_name = recomputed_hours.broker_name
                and messages.queue_name = recomputed_hours.queue_name
                and date_trunc('hour', messages.first_attempted_at)
                = recomputed_hours.first_attempted_hour
    ),

    overtaken as (
        select
            recomputed_messages.*,
            {#- least() skips nulls: none only when neither part has an acknowledgement. #}
            least(
                same_hour_overtaken.later_in_hour_acknowledged_at,
                later_hours_acknowledged.later_hours_acknowledged_at
            ) as first_later_message_acknowledged_at
        from recomputed_messages
        inner join same_hour_overtaken
            on recomputed_messages.message_key = same_hour_overtaken.message_key
        inner join later_hours_acknowledged
            on
                recomputed_messages.broker_name = later_hours_acknowledged.broker_name
                and recomputed_messages.queue_name = later_hours_acknowledged.queue_name
                and same_hour_overtaken.first_attempted_hour
                = later_hours_acknowledged.first_attempted_hour
    ),
{% else %}
    overtaken as (
        select
            messages.*,
            {#- Spark recomputes a frame ending at unbounded following for every row (quadratic
                in a queue's messages); the same rows in reverse order are a running frame. #}
            min(messages.acknowledged_at) over (
                partition by messages.broker_name, messages.queue_name
                order by messages.first_attempted_at desc, messages.message_key desc
                rows between unbounded preceding and 1 preceding
            ) as first_later_message_acknowledged_at
        from messages
    ),
{% endif %}

final as (
    select
        message_key,
        broker_name,
        queue_name,
        message_id,
        first_attempted_at,
        acknowledged_at,
        failure_count,
        redelivered_count,
        first_later_message_acknowledged_at,
        sequenced_at,
        message_partition,
        coalesce(
            first_later_message_acknowledged_at
            < coalesce(acknowledged_at, timestamp '9999-12-31 23:59:59'),
            false
        ) as has_out_of_order_processing
    from overtaken
    {# Every message can overtake, but only one that failed or was redelivered can be
        processed out of order: the others get no row (most messages, at scale). #}
    where failure_count > 0 or redelivered_count > 0
)

select /*+ rebalance(message_partition) */ * from final
