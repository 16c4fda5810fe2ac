{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['attempt_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Per Service Broker queue, its attempts in order and the run of consecutive
-- whole-transaction rollbacks after each one (rules.md, "Queues"): `rolled_back` extends
-- the run; committed, rolled_back_to_savepoint and ended_conversation reset it to 0.
-- Gaps and islands: every non-rollback attempt starts a new island; the run is the count
-- of rollbacks so far in the island.

{#-
    Incremental (Parquet, partition overwrite by the time bucket of the attempt). A run takes the
    attempts of landing batches not processed yet, finds the time bucket of the earliest (an hour by default) (a
    late-arriving attempt makes it early), and sequences again every attempt from that bucket
    on, continuing from each queue's attempt number and run at its last attempt before it.
    Buckets before the cutoff are neither read in full nor rewritten.
-#}
{%- set partition_seconds = var('attempt_partition_seconds', 3600) -%}
{%- set incremental = is_incremental() -%}
{%- set run_columns = [
    'attempt_key',
    'queue_key',
    'server_name',
    'database_name',
    'queue_name',
    'attempted_at',
    'attempt_id',
    'source_file',
    'record_number',
    'batch_id',
    'sequenced_at',
    'outcome',
    'is_whole_transaction_rollback',
] -%}
{%- set new_attempts_filter = unprocessed_attempts_filter(
    incremental, "broker_kind = 'service_broker'"
) -%}
{%- if incremental -%}
    {%- set cutoff_partition = earliest_time_bucket(
        ref('int_receive_attempts_sequenced'), new_attempts_filter, partition_seconds
    ) -%}
{%- endif %}

with new_attempts as (
    select
        {{ run_columns | join(',\n        ') }}
    from {{ ref('int_receive_attempts_sequenced') }}
    {{ new_attempts_filter }}
),
{%- if incremental %}

    recent_attempts as (
        select
            {{ run_columns | join(',\n            ') }}
        from {{ this }}
        {{ partition_bound_filter('attempt_partition', '>=', cutoff_partition) }}
    ),

    carried as (
        select
            queue_key,
            max(queue_attempt_number) as carried_attempt_number,
            max_by(rollback_run, queue_attempt_number) as carried_rollback_run
        from {{ this }}
        {{ partition_bound_filter('attempt_partition', '<', cutoff_partition) }}
        group by queue_key
    ),
{%- endif %}

attempts as (
    select * from new_attempts
    {%- if incremental %}
        union all
        select * from recent_attempts
    {%- endif %}
),

islands as (
    select
        attempts.*,
        row_number() over queue_attempts as queue_attempt_number_since_cutoff,
        sum(case when attempts.is_whole_transaction_rollback then 0 else 1 end)
            over queue_attempts_so_far as reset_island
    from attempts
    window
        queue_attempts as (
            partition by attempts.queue_key
            order by
                {{ attempt_order('attempts', 16) }}
        ),
        queue_attempts_so_far as (
            partition by attempts.queue_key
            order by
                {{ attempt_order('attempts', 16) }}
            rows between unbounded preceding and current row
        )
),

runs as (
    select
        islands.*,
        sum(case when islands.is_whole_transaction_rollback then 1 else 0 end) over (
            partition by islands.queue_key, islands.reset_island
            order by islands.queue_attempt_number_since_cutoff
            rows between unbounded preceding and current row
        ) as rollback_run_since_cutoff
    from islands
),

final as (
    select
        runs.attempt_key,
        runs.queue_key,
        runs.server_name,
        runs.database_name,
        runs.queue_name,
        runs.attempted_at,
        runs.attempt_id,
        runs.source_file,
        runs.record_number,
        runs.batch_id,
        runs.sequenced_at,
        runs.outcome,
        runs.is_whole_transaction_rollback,
        runs.reset_island,
        {%- if incremental %}
            coalesce(carried.carried_attempt_number, 0)
            + runs.queue_attempt_number_since_cutoff as queue_attempt_number,
            runs.rollback_run_since_cutoff + case
                when runs.reset_island = 0 then coalesce(carried.carried_rollback_run, 0)
                else 0
            end as rollback_run,
        {%- else %}
            runs.queue_attempt_number_since_cutoff as queue_attempt_number,
            runs.rollback_run_since_cutoff as rollback_run,
        {%- endif %}
        {{ time_bucket('runs.attempted_at', partition_seconds) }} as attempt_partition
    {%- if incremental %}
        from runs
        left join carried
            on runs.queue_key = carried.queue_key
    {%- else %}
        from runs
    {%- endif %}
)

select * from final
