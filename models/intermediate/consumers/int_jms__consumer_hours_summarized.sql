{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['attempt_partition'],
        meta={'tests_check_latest': 'rewritten_at'},
    )
}}

-- Per JMS consumer setting, server and attempt hour: its counted attempts, the longest
-- same-type and any-type runs of the circuit breaker in the hour, and the attempt where the
-- longest same-type run ended. consumer_circuit_breakers adds the hours up, and
-- int_alerts__breaker_tripped_still_receiving counts the hours after a trip from here, instead
-- of reading every counted attempt of history on every build.

{#-
    Incremental like int_service_broker__queue_hours_summarized: a run recomputes only the
    hours int_jms__consumer_failure_runs rewrote since this model last read them, found by
    the run that wrote them (`rewritten_at`, changed_partitions_filter).
    The attempt ending the longest same-type run is the greatest by (run, attempted_at,
    source_file, record_number, attempt_key), the order consumer_circuit_breakers breaks ties
    by; attempt_key is unique, so the greatest of the hours' is the greatest of all attempts.
#}
with runs as (
    select
        consumer_id,
        server_name,
        attempted_at,
        source_file,
        record_number,
        attempt_key,
        exception_class,
        same_type_run,
        any_type_run,
        rewritten_at,
        attempt_partition
    from {{ ref('int_jms__consumer_failure_runs') }}
    {{ changed_partitions_filter(
        ref('int_jms__consumer_failure_runs'),
        'attempt_partition',
        'rewritten_at',
        is_incremental(),
    ) }}
),

hours as (
    select
        consumer_id,
        server_name,
        attempt_partition,
        count(*) as attempt_count,
        min(attempted_at) as first_attempted_at,
        max(attempted_at) as last_attempted_at,
        max(any_type_run) as longest_any_type_run,
        max(
            struct(
                same_type_run,
                attempted_at,
                source_file,
                record_number,
                attempt_key,
                exception_class
            )
        ) as same_type_run_end,
        max(rewritten_at) as rewritten_at
    from runs
    group by consumer_id, server_name, attempt_partition
),

final as (
    select
        hours.consumer_id,
        hours.server_name,
        hours.attempt_count,
        hours.first_attempted_at,
        hours.last_attempted_at,
        hours.same_type_run_end.same_type_run as longest_same_type_run,
        hours.longest_any_type_run,
        hours.same_type_run_end.exception_class as same_type_exception_class,
        hours.same_type_run_end.attempted_at as same_type_run_end_at,
        hours.same_type_run_end.source_file as same_type_run_end_source_file,
        hours.same_type_run_end.record_number as same_type_run_end_record_number,
        hours.same_type_run_end.attempt_key as same_type_run_end_attempt_key,
        hours.rewritten_at,
        {# The partition column last, as the table stores it. #}
        hours.attempt_partition
    from hours
)

select * from final
