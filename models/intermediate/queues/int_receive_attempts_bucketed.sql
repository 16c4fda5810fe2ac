{{
    config(
        materialized='incremental',
        incremental_strategy='append',
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Receive attempts counted per queue, minute and landing batch: attempts, failures,
-- successes and the first and last success time in the minute. The alerts mart asks "was
-- there a successful receive between two times" of these rows instead of every attempt: with
-- both the first and the last success of each minute, the answer is exact for any window of
-- at least a minute.

{#-
    Incremental by appending: a run counts only the attempts of landing batches it has not
    counted yet (unprocessed_attempts_filter), so it costs what the new data costs. A late
    attempt adds a row to its own minute; readers sum over batches.
#}
{%- set bucket_seconds = var('alert_bucket_seconds') %}

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ unprocessed_attempts_filter(is_incremental(), 'true') }}
),

final as (
    select
        {{ surrogate_key(['queue_key', time_bucket('attempted_at', bucket_seconds), 'batch_id']) }}
            as attempt_bucket_key,
        queue_key,
        max(broker_kind) as broker_kind,
        max(server_name) as server_name,
        max(database_name) as database_name,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        cast({{ time_bucket('attempted_at', bucket_seconds) }} as timestamp) as bucket_start,
        batch_id,
        count(*) as attempt_count,
        count_if(is_failure) as failure_count,
        count_if(is_success) as success_count,
        min(case when is_success then attempted_at end) as first_succeeded_at,
        max(case when is_success then attempted_at end) as last_succeeded_at,
        max(attempted_at) as last_attempted_at,
        max(sequenced_at) as sequenced_at
    from attempts
    group by queue_key, {{ time_bucket('attempted_at', bucket_seconds) }}, batch_id
)

select * from final
