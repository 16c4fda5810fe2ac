{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['attempt_partition'],
        meta={'tests_check_latest': 'rewritten_at'},
        on_schema_change='append_new_columns',
        pre_hook=[
            "{{ record_batch_watermark('pending') }}",
        ],
        post_hook=[
            "drop view if exists {{ cached_rows_view(this) }}",
            "{{ record_batch_watermark('committed') }}",
        ],
    )
}}

-- Per Service Broker queue, its attempts in order and the run of consecutive
-- whole-transaction rollbacks after each one (rules.md, "Queues"): `rolled_back` extends
-- the run; committed, rolled_back_to_savepoint and ended_conversation reset it to 0.
-- Gaps and islands: every non-rollback attempt starts a new island; the run is the count
-- of rollbacks so far in the island.

{#-
    Incremental (Parquet, partition overwrite by the time bucket of the attempt). A new attempt
    changes the runs of its queue's attempts after it up to the queue's next reset, no
    further. So a run takes the attempts of landing batches not processed yet and rewrites
    only the buckets that hold them (an hour by default), in segments of consecutive buckets,
    each taking in the next bucket while a queue's island may go on past it
    (rewrite_segments). Each segment is ordered again on its own, continuing from each
    queue's run at its last attempt before the segment, read from the last buckets before it
    that hold one (carry_window_filter). A late attempt in the middle of history rewrites its
    hour, not every hour after it. queue_attempt_number counts within the bucket, so
    buckets that are not rewritten keep theirs. `rewritten_at` marks the run that wrote a
    row: a segment takes in whole buckets with no new attempt, whose rows keep their
    `sequenced_at`, so only it tells a reader which buckets changed
    (int_service_broker__queue_hours_summarized, for queue_health).
-#}
{%- set partition_seconds = var('attempt_partition_seconds') -%}
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
{%- set attempt_bucket = time_bucket('attempted_at', partition_seconds) -%}
{%- set segment_index = '1' -%}
{%- set carried_selects = [] -%}
{%- set rewritten_at = run_started_at.strftime('%Y-%m-%d %H:%M:%S') -%}
{#- The new attempts: new_attempts below, and in an incremental run also the queries run
    while compiling. -#}
{%- set new_attempts_sql = 'select ' ~ run_columns | join(', ') ~ ', ' ~ attempt_bucket
    ~ ' as attempt_partition from ' ~ ref('int_receive_attempts_sequenced') ~ ' '
    ~ new_attempts_filter -%}
{%- if incremental -%}
    {#- Read several times: cached once. -#}
    {%- set new_attempts_sql = cache_rows(this, new_attempts_sql) -%}
    {#- The newest batch among them, for the hooks (record_batch_watermark). -#}
    {%- do batches_taken(this, newest_batch(new_attempts_sql)) -%}
    {%- set segments = rewrite_segments(
        this, new_attempts_sql, 'attempt_partition', 'queue_key',
        'not is_whole_transaction_rollback'
    ) -%}
    {#- Which segment a bucket is in (null: not rewritten), and per segment its queues' run at
        their last attempt before it. -#}
    {%- set cases = [] -%}
    {%- for segment in segments -%}
        {%- set in_segment = 'attempt_partition between ' ~ string_literal_list([segment[0]])
            ~ ' and ' ~ string_literal_list([segment[1]]) -%}
        {%- do cases.append('when ' ~ in_segment ~ ' then ' ~ loop.index) -%}
        {%- set segment_keys_sql = 'select queue_key from (' ~ new_attempts_sql
            ~ ') as new_rows where ' ~ in_segment ~ ' union all select queue_key from '
            ~ this ~ ' where ' ~ in_segment -%}
        {%- do carried_selects.append(
            'select ' ~ loop.index ~ ' as segment_id, queue_key, max_by(rollback_run, '
            ~ 'struct(attempt_partition, queue_attempt_number)) as carried_rollback_run from '
            ~ this ~ ' ' ~ carry_window_filter(
                this, 'attempt_partition', segment[0], ['queue_key'], segment_keys_sql
            ) ~ ' group by queue_key'
        ) -%}
    {%- endfor -%}
    {%- set segment_index = ('case ' ~ cases | join(' ') ~ ' end') if cases else 'null' -%}
{%- endif %}

with new_attempts as (
    select * from ({{ new_attempts_sql }}) as new_rows
),
{%- if incremental %}

    rewritten_attempts as (
        select
            {{ run_columns | join(',\n            ') }},
            attempt_partition
        from {{ this }}
        where {{ segment_index }} is not null
    ),

    carried as (
        {%- if carried_selects %}
            {{ carried_selects | join(' union all ') }}
        {%- else %}
            select
                0 as segment_id,
                cast(null as string) as queue_key,
                cast(null as bigint) as carried_rollback_run
            where false
        {%- endif %}
    ),
{%- endif %}

attempts as (
    select
        unioned.*,
        {{ segment_index }} as segment_id
    from (
        select * from new_attempts
        {%- if incremental %}
            union all
            select * from rewritten_attempts
        {%- endif %}
    ) as unioned
),

islands as (
    select
        attempts.*,
        row_number() over (
            partition by attempts.queue_key, attempts.attempt_partition
            order by
                {{ attempt_order('attempts', 16) }}
        ) as queue_attempt_number,
        sum(case when attempts.is_whole_transaction_rollback then 0 else 1 end) over (
            partition by attempts.queue_key, attempts.segment_id
            order by
                {{ attempt_order('attempts', 16) }}
            rows between unbounded preceding and current row
        ) as reset_island
    from attempts
),

runs as (
    select
        islands.*,
        sum(case when islands.is_whole_transaction_rollback then 1 else 0 end) over (
            partition by islands.queue_key, islands.segment_id, islands.reset_island
            order by
                {{ attempt_order('islands', 16) }}
            rows between unbounded preceding and current row
        ) as rollback_run_in_island
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
        runs.queue_attempt_number,
        {%- if incremental %}
            runs.rollback_run_in_island + case
                when runs.reset_island = 0 then coalesce(carried.carried_rollback_run, 0)
                else 0
            end as rollback_run,
        {%- else %}
            runs.rollback_run_in_island as rollback_run,
        {%- endif %}
        timestamp '{{ rewritten_at }}' as rewritten_at,
        runs.attempt_partition
    {%- if incremental %}
        from runs
        left join carried
            on
                runs.queue_key = carried.queue_key
                and runs.segment_id = carried.segment_id
    {%- else %}
        from runs
    {%- endif %}
)

select * from final
