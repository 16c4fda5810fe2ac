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

-- Per JMS consumer setting and server, its counted attempts in order with the circuit
-- breaker's runs after each one (rules.md, "Circuit breakers"): temporarily_unavailable
-- attempts are left out (they neither count nor reset); acknowledged resets both runs;
-- rolled_back grows the any-type run, and the same-type run when its exception class
-- equals the previous counted failure's (else it restarts at 1).
-- Gaps and islands: an acknowledgement, or a failure whose class differs from the previous
-- counted attempt's, starts a new island.

{#-
    Incremental like int_service_broker__queue_rollback_runs (partition overwrite by the time
    bucket of the attempt). A new attempt changes the runs of its consumer and server after it
    up to their next acknowledgement, which resets both runs, and no further. So a run takes
    the attempts of landing batches not processed yet and rewrites only the buckets that hold
    them, in segments of consecutive buckets, each taking in the next bucket while a consumer
    and server's island may go on past it (rewrite_segments). Each segment is ordered again on
    its own, continuing from each consumer and server's state at its last counted attempt
    before the segment (outcome, exception class and both runs), read from the last buckets
    before it that hold one (carry_window_filter). A late attempt in the middle of history
    rewrites its hour or two, not every hour after it. No column numbers the attempts across
    buckets: such a number would change in every bucket after a late attempt
    (breaker_backtest numbers them itself, on demand).
    `rewritten_at` marks the run that wrote a row: a segment takes in whole buckets with no
    new attempt, whose rows keep their `sequenced_at`, so only it tells a reader which buckets
    changed (int_jms__consumer_hours_summarized, for consumer_circuit_breakers).
-#}
{%- set partition_seconds = var('attempt_partition_seconds') -%}
{%- set incremental = is_incremental() -%}
{%- set key_columns = ['consumer_id', 'server_name'] -%}
{%- set order_columns = ['attempted_at', 'source_file', 'record_number', 'attempt_key'] -%}
{%- set run_columns = [
    'attempt_key',
    'consumer_id',
    'server_name',
    'attempted_at',
    'source_file',
    'record_number',
    'batch_id',
    'sequenced_at',
    'outcome',
    'is_failure',
    'is_success',
] -%}
{%- set new_attempts_filter = unprocessed_attempts_filter(
    incremental, "broker_kind = 'jms' and not is_temporarily_unavailable"
) -%}
{%- set attempt_bucket = time_bucket('attempted_at', partition_seconds) -%}
{%- set segment_index = '1' -%}
{%- set carried_selects = [] -%}
{%- set rewritten_at = run_started_at.strftime('%Y-%m-%d %H:%M:%S') -%}
{#- The new attempts: new_attempts below, and in an incremental run also the queries run
    while compiling. -#}
{%- set new_attempts_sql = 'select ' ~ run_columns | join(', ')
    ~ ', error_key as exception_class, ' ~ attempt_bucket ~ ' as attempt_partition from '
    ~ ref('int_receive_attempts_sequenced') ~ ' ' ~ new_attempts_filter -%}
{%- if incremental -%}
    {#- Read several times: cached once. -#}
    {%- set new_attempts_sql = cache_rows(this, new_attempts_sql) -%}
    {#- The newest batch among them, for the hooks (record_batch_watermark). -#}
    {%- do batches_taken(this, newest_batch(new_attempts_sql)) -%}
    {%- set segments = rewrite_segments(
        this, new_attempts_sql, 'attempt_partition', key_columns, 'is_success',
        order_columns=order_columns
    ) -%}
    {#- Which segment a bucket is in (null: not rewritten), and per segment its consumers'
        state at their last counted attempt before it. -#}
    {%- set last_before = 'struct(' ~ order_columns | join(', ') ~ ')' -%}
    {%- set cases = [] -%}
    {%- for segment in segments -%}
        {%- set in_segment = 'attempt_partition between ' ~ string_literal_list([segment[0]])
            ~ ' and ' ~ string_literal_list([segment[1]]) -%}
        {%- do cases.append('when ' ~ in_segment ~ ' then ' ~ loop.index) -%}
        {%- set segment_keys_sql = 'select ' ~ key_columns | join(', ') ~ ' from ('
            ~ new_attempts_sql ~ ') as new_rows where ' ~ in_segment ~ ' union all select '
            ~ key_columns | join(', ') ~ ' from ' ~ this ~ ' where ' ~ in_segment -%}
        {%- do carried_selects.append(
            'select ' ~ loop.index ~ ' as segment_id, consumer_id, server_name, '
            ~ 'max_by(outcome, ' ~ last_before ~ ') as carried_outcome, '
            ~ 'max_by(exception_class, ' ~ last_before ~ ') as carried_exception_class, '
            ~ 'max_by(any_type_run, ' ~ last_before ~ ') as carried_any_type_run, '
            ~ 'max_by(same_type_run, ' ~ last_before ~ ') as carried_same_type_run from '
            ~ this ~ ' ' ~ carry_window_filter(
                this, 'attempt_partition', segment[0], key_columns, segment_keys_sql
            ) ~ ' group by consumer_id, server_name'
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
            exception_class,
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
                cast(null as string) as consumer_id,
                cast(null as string) as server_name,
                cast(null as string) as carried_outcome,
                cast(null as string) as carried_exception_class,
                cast(null as bigint) as carried_any_type_run,
                cast(null as bigint) as carried_same_type_run
            where false
        {%- endif %}
    ),
{%- endif %}

counted as (
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

ordered as (
    select
        counted.*,
        row_number() over consumer_attempts as attempt_number_in_segment,
        lag(counted.outcome) over consumer_attempts as previous_outcome_in_segment,
        lag(counted.exception_class) over consumer_attempts
            as previous_exception_class_in_segment
    from counted
    window consumer_attempts as (
        partition by counted.consumer_id, counted.server_name, counted.segment_id
        order by
            counted.attempted_at,
            counted.source_file,
            counted.record_number,
            counted.attempt_key
    )
),

continued as (
    {#- The first attempt of a segment looks back at the state carried into it. #}
    select
        ordered.* except (previous_outcome_in_segment, previous_exception_class_in_segment),
        {%- if incremental %}
            case
                when ordered.attempt_number_in_segment = 1 then carried.carried_outcome
                else ordered.previous_outcome_in_segment
            end as previous_outcome,
            case
                when ordered.attempt_number_in_segment = 1
                    then carried.carried_exception_class
                else ordered.previous_exception_class_in_segment
            end as previous_exception_class,
            coalesce(carried.carried_any_type_run, 0) as carried_any_type_run,
            coalesce(carried.carried_same_type_run, 0) as carried_same_type_run
        {%- else %}
            ordered.previous_outcome_in_segment as previous_outcome,
            ordered.previous_exception_class_in_segment as previous_exception_class,
            0 as carried_any_type_run,
            0 as carried_same_type_run
        {%- endif %}
    {%- if incremental %}
        from ordered
        left join carried
            on
                ordered.consumer_id = carried.consumer_id
                and ordered.server_name = carried.server_name
                and ordered.segment_id = carried.segment_id
    {%- else %}
        from ordered
    {%- endif %}
),

flagged as (
    select
        continued.*,
        case
            when continued.is_success then 1
            when continued.previous_outcome is null then 1
            when continued.previous_outcome = 'acknowledged' then 1
            when not (continued.exception_class <=> continued.previous_exception_class) then 1
            else 0
        end as starts_same_type_island,
        sum(case when continued.is_success then 1 else 0 end) over (
            partition by continued.consumer_id, continued.server_name, continued.segment_id
            order by continued.attempt_number_in_segment
            rows between unbounded preceding and current row
        ) as any_type_island
    from continued
),

islands as (
    select
        flagged.*,
        sum(flagged.starts_same_type_island) over (
            partition by flagged.consumer_id, flagged.server_name, flagged.segment_id
            order by flagged.attempt_number_in_segment
            rows between unbounded preceding and current row
        ) as same_type_island
    from flagged
),

runs_in_islands as (
    select
        islands.*,
        sum(case when islands.is_failure then 1 else 0 end) over (
            partition by
                islands.consumer_id,
                islands.server_name,
                islands.segment_id,
                islands.any_type_island
            order by islands.attempt_number_in_segment
            rows between unbounded preceding and current row
        ) as any_type_run_in_island,
        sum(case when islands.is_failure then 1 else 0 end) over (
            partition by
                islands.consumer_id,
                islands.server_name,
                islands.segment_id,
                islands.same_type_island
            order by islands.attempt_number_in_segment
            rows between unbounded preceding and current row
        ) as same_type_run_in_island
    from islands
),

{#
    Island 0 is the stretch of a segment before its first reset: it continues the run carried
    into the segment (0 on a full refresh).
#}
runs as (
    select
        runs_in_islands.*,
        runs_in_islands.any_type_run_in_island + case
            when runs_in_islands.any_type_island = 0 then runs_in_islands.carried_any_type_run
            else 0
        end as any_type_run,
        runs_in_islands.same_type_run_in_island + case
            when runs_in_islands.same_type_island = 0 then runs_in_islands.carried_same_type_run
            else 0
        end as same_type_run
    from runs_in_islands
),

final as (
    select
        runs.attempt_key,
        runs.consumer_id,
        runs.server_name,
        runs.attempted_at,
        runs.source_file,
        runs.record_number,
        runs.batch_id,
        runs.sequenced_at,
        runs.outcome,
        runs.is_failure,
        runs.is_success,
        runs.exception_class,
        runs.previous_outcome,
        runs.previous_exception_class,
        runs.starts_same_type_island,
        runs.any_type_island,
        runs.same_type_island,
        runs.any_type_run,
        runs.same_type_run,
        timestamp '{{ rewritten_at }}' as rewritten_at,
        runs.attempt_partition
    from runs
)

select * from final
