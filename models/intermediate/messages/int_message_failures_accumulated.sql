{{ config(materialized='table', tags=['on_demand']) }}

-- One row per message with at least one failure: its failures in order, each with the
-- counts the classification ladder reads as they stood right after it (failures, validation
-- and permanent failures, JMS deliveries so far). policy_backtest evaluates
-- poison_reason on each of them with each candidate policy: the first failure at which a
-- candidate says poison is where it would have decided.

{#-
    Read only by policy_backtest, a question asked on demand: tagged like it, so that the
    production build after each ingest leaves it out (selectors.yml) and `poisonwatch
    backtest` builds it. A table, rebuilt whole by each backtest: partitioned like the
    sequenced attempts, an incremental copy would keep partitions a full refresh of theirs
    no longer has, and dropping it from their hook would be a model touching another's table.
#}
with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
),

successes as (
    select
        message_key,
        max(attempt_number) as last_success_attempt_number
    from attempts
    where is_success
    group by message_key
),

failures as (
    select
        message_key,
        message_partition,
        sequenced_at,
        broker_kind,
        queue_name,
        attempt_key,
        attempt_number,
        attempted_at,
        is_whole_transaction_rollback,
        row_number() over message_failures as failure_number,
        count_if(failure_class = 'validation') over message_failures_so_far
            as validation_failures,
        count_if(failure_class = 'permanent') over message_failures_so_far
            as permanent_failures,
        max(delivery_count) over message_failures_so_far as max_delivery_count
    from attempts
    where is_failure
    window
        message_failures as (
            partition by message_key
            order by attempt_number
        ),
        message_failures_so_far as (
            partition by message_key
            order by attempt_number
            rows between unbounded preceding and current row
        )
),

collected as (
    select
        failures.message_key,
        max(failures.message_partition) as message_partition,
        max(failures.sequenced_at) as sequenced_at,
        max(failures.broker_kind) as broker_kind,
        max(failures.queue_name) as queue_name,
        count(*) as failure_count,
        {#- array_sort orders the structs by their first field, the failure number. #}
        array_sort(collect_list(struct(
            failures.failure_number,
            failures.attempt_number,
            failures.attempt_key,
            failures.attempted_at,
            failures.is_whole_transaction_rollback,
            failures.validation_failures,
            failures.permanent_failures,
            {#- JMS deliveries as int_messages_classified counts them, so far. #}
            case
                when failures.broker_kind = 'jms'
                    then
                        greatest(
                            failures.failure_number, coalesce(failures.max_delivery_count, 0)
                        )
            end as delivery_count
        ))) as failures
    from failures
    group by failures.message_key
),

final as (
    select
        collected.message_key,
        collected.broker_kind,
        collected.queue_name,
        collected.failure_count,
        successes.last_success_attempt_number,
        collected.failures,
        collected.sequenced_at,
        collected.message_partition
    from collected
    left join successes
        on collected.message_key = successes.message_key
)

select * from final
