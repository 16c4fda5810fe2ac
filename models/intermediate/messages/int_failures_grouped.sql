{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Failed attempts grouped by error key and normalised message within each message partition
-- of int_receive_attempts_sequenced: the partial aggregates that failure_groups adds up.

{#-
    Incremental like its upstream: a run re-aggregates only the partitions of
    int_receive_attempts_sequenced rewritten since its last run, so the regular expressions of
    normalize_error_message run over new failures only. Every attempt of a message lives in
    one partition, so message counts per partition add up to distinct messages overall.
#}
with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

failed_attempts as (
    select
        message_partition,
        broker_kind,
        coalesce(error_key, '') as error_key,
        failure_class,
        error_message,
        {{ normalize_error_message('coalesce(error_message, \'\')') }} as normalized_message,
        message_key,
        queue_key,
        attempted_at,
        attempt_key,
        sequenced_at
    from attempts
    where is_failure
),

final as (
    select
        {{ surrogate_key(['broker_kind', 'error_key', 'normalized_message']) }}
            as failure_group_id,
        broker_kind,
        error_key,
        normalized_message,
        max({{ failure_class_rank('failure_class') }}) as failure_class_rank,
        {#- The earliest failure, ties broken by attempt key, so that partial examples
            combine into the same example as one pass over all failures. #}
        min(struct(attempted_at, attempt_key, error_message)) as example_failure,
        count(*) as failure_count,
        size(collect_set(message_key)) as message_count,
        collect_set(queue_key) as queue_keys,
        min(attempted_at) as first_seen_at,
        max(attempted_at) as last_seen_at,
        max(sequenced_at) as sequenced_at,
        message_partition
    from failed_attempts
    group by message_partition, broker_kind, error_key, normalized_message
)

{# rebalance: each partition written by one task (AQE splits a big one), not a file from
    every task: fewer files to write and read. #}
select /*+ rebalance(message_partition) */ * from final
