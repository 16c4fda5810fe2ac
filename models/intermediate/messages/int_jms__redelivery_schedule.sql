{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Per failed JMS delivery, when the broker should redeliver it: Artemis' delayed
-- redelivery, delay x multiplier^(n - 1) capped at the max delay (policy seed), n being
-- the message's failures so far; and when it was in fact delivered again.

{#-
    No window here: the next attempt's time and whether a failure is its message's last come
    with the sequenced attempts, from the one sort by message and attempt order they already
    make, so the attempts are not ordered a second time here.
#}

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {#- Incremental: only the message partitions rewritten upstream since the last run. #}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

policies as (
    select * from {{ ref('int_queue_policies') }}
    where broker_kind = 'jms'
),

jms_attempts_with_policies as (
    select
        attempts.attempt_key,
        attempts.message_key,
        attempts.broker_name,
        attempts.queue_name,
        attempts.message_id,
        attempts.attempt_number,
        attempts.attempted_at,
        attempts.outcome,
        attempts.is_failure,
        attempts.failures_so_far,
        attempts.sequenced_at,
        attempts.message_partition,
        policies.redelivery_delay_ms,
        policies.redelivery_multiplier,
        policies.max_redelivery_delay_ms,
        attempts.next_attempted_at,
        attempts.is_latest_failure
    from attempts
    left join policies
        on attempts.queue_name = policies.queue_name
    where attempts.broker_kind = 'jms'
),

scheduled as (
    select
        jms_attempts_with_policies.*,
        {{ redelivery_delay_ms(
            'redelivery_delay_ms',
            'redelivery_multiplier',
            'max_redelivery_delay_ms',
            'failures_so_far'
        ) }}
            as expected_redelivery_delay_ms
    from jms_attempts_with_policies
    where jms_attempts_with_policies.is_failure
)

{# rebalance: each partition written by one task (AQE splits a big one), not a file from
    every task: fewer files to write and read. #}
select /*+ rebalance(message_partition) */
    scheduled.*,
    timestamp_millis(
        unix_millis(scheduled.attempted_at) + coalesce(scheduled.expected_redelivery_delay_ms, 0)
    )
        as expected_redelivery_at,
    unix_millis(scheduled.next_attempted_at)
    - unix_millis(scheduled.attempted_at) as actual_redelivery_delay_ms,
    coalesce(
        unix_millis(scheduled.next_attempted_at) - unix_millis(scheduled.attempted_at)
        < scheduled.expected_redelivery_delay_ms,
        false
    ) as is_redelivered_early
from scheduled
