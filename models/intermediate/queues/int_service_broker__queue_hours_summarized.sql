{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['attempt_partition'],
        meta={'tests_check_latest': 'rewritten_at'},
    )
}}

-- Per Service Broker queue and attempt hour: the longest run of whole-transaction rollbacks
-- in the hour and the run at its last attempt. queue_health takes every hour before a
-- snapshot's own from here, one row each, instead of grouping the queue's attempts of all
-- history on every build.

{#-
    Incremental like its upstream (partition overwrite by `attempt_partition`): a run
    recomputes only the hours int_service_broker__queue_rollback_runs rewrote since this
    model last read them, found by the run that wrote them (`rewritten_at`,
    changed_partitions_filter). Its `sequenced_at` would miss the
    hours a segment took in without a new attempt: their runs change, their attempts do not.
    queue_attempt_number orders a queue's attempts within their hour (attempt_order).
#}
with runs as (
    select
        queue_key,
        queue_attempt_number,
        rollback_run,
        rewritten_at,
        attempt_partition
    from {{ ref('int_service_broker__queue_rollback_runs') }}
    {{ changed_partitions_filter(
        ref('int_service_broker__queue_rollback_runs'),
        'attempt_partition',
        'rewritten_at',
        is_incremental(),
    ) }}
),

final as (
    select
        queue_key,
        attempt_partition,
        max(rollback_run) as longest_rollback_run,
        max_by(rollback_run, queue_attempt_number) as last_rollback_run,
        max(rewritten_at) as rewritten_at
    from runs
    group by queue_key, attempt_partition
)

{# The partition column last, as the table stores it. #}
select
    queue_key,
    longest_rollback_run,
    last_rollback_run,
    rewritten_at,
    attempt_partition
from final
