{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        pre_hook="{{ record_batch_watermark('pending') }}",
        post_hook=[
            "{{ record_resequenced_watermark() }}",
            "drop view if exists {{ cached_rows_view(this) }}",
            "{{ record_batch_watermark('committed') }}",
        ],
    )
}}

-- Per JMS message that failed or was redelivered, whether it was processed out of order (seed
-- 002: "ordering is broken then"): a message of the same queue first delivered after it was
-- acknowledged before it was (or while it still is not).
-- A window over messages ordered by first delivery replaces a self-join.

{#-
    Incremental (Parquet, partition overwrite, partitioned like the sequenced attempts). A
    message's answer depends on the messages of its queue first delivered after it (its later
    messages): the earliest acknowledgement among them. New attempts change a message's first
    delivery or acknowledgement only to the time of a new attempt, so with `new_since_at` the
    earliest new attempt of a queue:
    - a listed message first delivered before that (and before every message listed for the
      first time) keeps its later messages, and gains only the new values of the messages that
      have new attempts: its earliest later acknowledgement is the smaller of the one it had
      and theirs (a window over those messages and the few listed ones it can change: those
      with none yet, or one at or after `new_since_at`);
    - the others, the newest part of the queue (`recompute_from_at`), are computed again from
      their attempts, which all lie after that time (the sequenced attempts read from there on,
      their files and partitions pruned by it).
    The table holds only listed messages (about 5 % of them), so it is read whole. A run writes
    only the partitions holding a row it changed. At 10M attempts the full window read 4M
    attempts of 3.2M messages (13.4 s of the +1 % build's history cost, README).
-#}
{%- set incremental = is_incremental() -%}
{%- set partition_seconds = var('message_partition_seconds', 3600) -%}
{%- set sequenced = ref('int_receive_attempts_sequenced') -%}
{%- set attempt_columns = [
    'message_key', 'broker_name', 'queue_name', 'message_id', 'attempted_at',
    'attempt_number', 'is_success', 'is_failure', 'is_redelivered', 'batch_id',
    'sequenced_at', 'message_partition',
] -%}
{#- Per message, from its attempts (every one of them: callers read whole messages). -#}
{%- set message_aggregates -%}
        message_key,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        max(message_id) as message_id,
        min(attempted_at) as first_attempted_at,
        min(case when is_success then attempted_at end) as acknowledged_at,
        count_if(is_failure) as failure_count,
        count_if(is_redelivered) as redelivered_count,
        max(batch_id) as batch_id,
        max(sequenced_at) as sequenced_at,
        max(message_partition) as message_partition
{%- endset -%}
{%- set recompute_from = none -%}
{%- set recompute_from_partition = none -%}
{%- set recent_filter = '' -%}
{%- if incremental -%}
    {%- set new_batches = unprocessed_batches_condition(this) -%}
    {#- The JMS attempts of the partitions the sequenced attempts rewrote since this model's
        last run: every message a new attempt touched, with all its attempts. Read twice
        (the bounds below, the model's query): cached once. -#}
    {%- set rewritten_sql = cache_rows(
        this,
        'select ' ~ attempt_columns | join(', ') ~ ', coalesce(' ~ new_batches
        ~ ', false) as is_new_attempt from ' ~ sequenced ~ ' '
        ~ resequenced_partitions_filter(true) ~ " and broker_kind = 'jms'"
    ) -%}
    {%- set changed_ctes -%}
        rewritten_attempts as (
            select * from ({{ rewritten_sql }}) as rewritten
        ),

        touched_messages as (
            select
                {{ message_aggregates | indent(8) }},
                min(case when is_new_attempt then attempted_at end) as first_new_attempted_at
            from rewritten_attempts
            group by message_key
        ),

        previous as (
            select * from {{ this }}
        ),

        {#- Per queue with new attempts: the earliest of them, and the earliest first
            delivery to compute again (a message listed for the first time has no earlier
            answer to start from). #}
        changed_queues as (
            select
                touched_messages.broker_name,
                touched_messages.queue_name,
                min(touched_messages.first_new_attempted_at) as new_since_at,
                least(
                    min(touched_messages.first_new_attempted_at),
                    min(
                        case
                            when
                                previous.message_key is null
                                and (
                                    touched_messages.failure_count > 0
                                    or touched_messages.redelivered_count > 0
                                )
                                then touched_messages.first_attempted_at
                        end
                    )
                ) as recompute_from_at
            from touched_messages
            left join previous
                on touched_messages.message_key = previous.message_key
            group by touched_messages.broker_name, touched_messages.queue_name
            having min(touched_messages.first_new_attempted_at) is not null
        )
    {%- endset -%}
    {%- if execute -%}
        {%- set newest = recorded_batch_watermark(sequenced) -%}
        {%- do batches_taken(this, newest if newest is not none else newest_batch(rewritten_sql)) -%}
        {%- set bounds = run_query(
            'with ' ~ changed_ctes ~ ' select cast(min(recompute_from_at) as string), '
            ~ time_bucket('min(recompute_from_at)', partition_seconds)
            ~ ' from changed_queues'
        ) -%}
        {%- set recompute_from = bounds.columns[0].values()[0] -%}
        {%- set recompute_from_partition = bounds.columns[1].values()[0] -%}
    {%- endif -%}
    {#- A message's partition is named after the hour of its first delivery when it was
        first seen, never earlier than its first delivery now: the bound prunes partitions
        by name and files by their statistics. -#}
    {%- set recent_filter = 'and false' if recompute_from is none else
        'and message_partition >= ' ~ string_literal_list([recompute_from_partition])
        ~ ' and attempted_at >= ' ~ timestamp_bound(recompute_from) -%}
{%- endif %}

{#- The JMS attempts; on an incremental run, the newest part of each changed queue: a
    message first delivered at or after recompute_from_at has all its attempts after it, its
    first one among them. #}
with jms_attempts as (
    select {{ attempt_columns | join(', ') }}
    from {{ sequenced }}
    where broker_kind = 'jms' {{ recent_filter }}
),
{%- if not incremental %}

    messages as (
        select
            {{ message_aggregates | indent(4) }}
        from jms_attempts
        group by message_key
    ),

    overtaken as (
        select
            messages.*,
            {#- Spark recomputes a frame ending at unbounded following for every row (quadratic:
                276 s at 1M attempts); the same rows in reverse order are a running frame. #}
            min(messages.acknowledged_at) over (
                partition by messages.broker_name, messages.queue_name
                order by messages.first_attempted_at desc, messages.message_key desc
                rows between unbounded preceding and 1 preceding
            ) as first_later_message_acknowledged_at
        from messages
    ),

    listed as (
        select * from overtaken
        {# Every message can overtake, but only one that failed or was redelivered can be
            processed out of order: the others get no row (most messages, at scale). #}
        where failure_count > 0 or redelivered_count > 0
    ),
{%- else %}

    {{ changed_ctes }},

    recent_messages as (
        select
            {{ message_aggregates | indent(4) }}
        from jms_attempts
        group by message_key
        having min(attempt_number) = 1
    ),

    recomputed as (
        select
            recent_messages.*,
            min(recent_messages.acknowledged_at) over (
                partition by recent_messages.broker_name, recent_messages.queue_name
                order by recent_messages.first_attempted_at desc, recent_messages.message_key desc
                rows between unbounded preceding and 1 preceding
            ) as first_later_message_acknowledged_at
        from recent_messages
        inner join changed_queues
            on
                recent_messages.broker_name <=> changed_queues.broker_name
                and recent_messages.queue_name <=> changed_queues.queue_name
        where recent_messages.first_attempted_at >= changed_queues.recompute_from_at
    ),

    {#- Listed messages before the recomputed part whose answer a new acknowledgement can lower:
        none later acknowledged yet, or not before the queue's earliest new attempt. #}
    probes as (
        select
            previous.message_key,
            previous.broker_name,
            previous.queue_name,
            previous.first_attempted_at,
            cast(null as timestamp) as acknowledged_at,
            true as is_probe
        from previous
        inner join changed_queues
            on
                previous.broker_name <=> changed_queues.broker_name
                and previous.queue_name <=> changed_queues.queue_name
        where
            previous.first_attempted_at < changed_queues.recompute_from_at
            and (
                previous.first_later_message_acknowledged_at is null
                or previous.first_later_message_acknowledged_at >= changed_queues.new_since_at
            )
    ),

    new_values as (
        select
            message_key,
            broker_name,
            queue_name,
            first_attempted_at,
            acknowledged_at,
            false as is_probe
        from touched_messages
        where first_new_attempted_at is not null and acknowledged_at is not null
    ),

    probed as (
        select
            message_key,
            is_probe,
            {#- For equal order keys the probe comes first: a message is not later than itself. #}
            min(acknowledged_at) over (
                partition by broker_name, queue_name
                order by first_attempted_at desc, message_key desc, is_probe desc
                rows between unbounded preceding and 1 preceding
            ) as later_new_acknowledged_at
        from (
            select * from probes
            union all
            select * from new_values
        ) as probes_and_values
    ),

    carried as (
        select
            previous.message_key,
            previous.broker_name,
            previous.queue_name,
            previous.message_id,
            previous.first_attempted_at,
            coalesce(touched_messages.acknowledged_at, previous.acknowledged_at) as acknowledged_at,
            coalesce(touched_messages.failure_count, previous.failure_count) as failure_count,
            coalesce(touched_messages.redelivered_count, previous.redelivered_count)
                as redelivered_count,
            least(
                previous.first_later_message_acknowledged_at, probed.later_new_acknowledged_at
            ) as first_later_message_acknowledged_at,
            coalesce(touched_messages.batch_id, previous.batch_id) as batch_id,
            coalesce(touched_messages.sequenced_at, previous.sequenced_at) as sequenced_at,
            coalesce(touched_messages.message_partition, previous.message_partition)
                as message_partition,
            touched_messages.first_new_attempted_at is not null
            or not (
                previous.first_later_message_acknowledged_at
                <=> least(
                    previous.first_later_message_acknowledged_at, probed.later_new_acknowledged_at
                )
            ) as is_changed
        from previous
        left join changed_queues
            on
                previous.broker_name <=> changed_queues.broker_name
                and previous.queue_name <=> changed_queues.queue_name
        left join touched_messages
            on previous.message_key = touched_messages.message_key
        left join probed
            on previous.message_key = probed.message_key and probed.is_probe
        where
            changed_queues.recompute_from_at is null
            or previous.first_attempted_at < changed_queues.recompute_from_at
    ),

    listed_with_changes as (
        select
            recomputed.* except (first_later_message_acknowledged_at),
            recomputed.first_later_message_acknowledged_at,
            true as is_changed
        from recomputed
        where recomputed.failure_count > 0 or recomputed.redelivered_count > 0
        union all
        select
            carried.* except (first_later_message_acknowledged_at, is_changed),
            carried.first_later_message_acknowledged_at,
            carried.is_changed
        from carried
    ),

    {#- Partition overwrite: every row of a partition that holds a changed row, and the
        partitions the changed messages were in before (the same, unless the sequenced attempts
        were rebuilt). #}
    changed_partitions as (
        select message_partition from listed_with_changes
        where is_changed
        union
        select previous.message_partition
        from previous
        left semi join listed_with_changes
            on
                previous.message_key = listed_with_changes.message_key
                and listed_with_changes.is_changed
    ),

    listed as (
        select listed_with_changes.* except (is_changed)
        from listed_with_changes
        left semi join changed_partitions
            on listed_with_changes.message_partition = changed_partitions.message_partition
    ),
{%- endif %}

final as (
    select
        listed.message_key,
        listed.broker_name,
        listed.queue_name,
        listed.message_id,
        listed.first_attempted_at,
        listed.acknowledged_at,
        listed.failure_count,
        listed.redelivered_count,
        listed.first_later_message_acknowledged_at,
        listed.batch_id,
        listed.sequenced_at,
        listed.message_partition,
        coalesce(
            listed.first_later_message_acknowledged_at
            < coalesce(listed.acknowledged_at, timestamp '9999-12-31 23:59:59'),
            false
        ) as has_out_of_order_processing
    from listed
)

{# rebalance: each partition written by one task, not a file from every task (README, "Open
    and run partitions"). #}
select /*+ rebalance(message_partition) */ * from final
