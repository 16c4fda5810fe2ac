{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['attempt_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
        post_hook="{{ record_resequenced_watermark() }}",
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
    Incremental like int_service_broker__queue_rollback_runs: attempts of new landing
    batches set a cutoff bucket (their earliest); every counted attempt from that bucket on is
    ordered again, continuing from each consumer and server's state at its last counted
    attempt before the cutoff (attempt number, outcome, exception class and both runs), read
    from the last buckets before the cutoff that still hold an attempt of each of them
    (carry_window_filter).
-#}
{%- set partition_seconds = var('attempt_partition_seconds', 3600) -%}
{%- set incremental = is_incremental() -%}
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
{%- if incremental -%}
    {%- set cutoff_partition = earliest_time_bucket(
        ref('int_receive_attempts_sequenced'), new_attempts_filter, partition_seconds
    ) -%}
    {#- Whose state is carried: every consumer and server ordered again from the cutoff. -#}
    {%- set carried_keys_sql -%}
        select consumer_id, server_name
        from {{ ref('int_receive_attempts_sequenced') }} {{ new_attempts_filter }}
        union all
        select consumer_id, server_name
        from {{ this }} {{ partition_bound_filter('attempt_partition', '>=', cutoff_partition) }}
    {%- endset -%}
{%- endif %}

with new_attempts as (
    select
        {{ run_columns | join(',\n        ') }},
        error_key as exception_class
    from {{ ref('int_receive_attempts_sequenced') }}
    {{ new_attempts_filter }}
),
{%- if incremental %}

    recent_attempts as (
        select
            {{ run_columns | join(',\n            ') }},
            exception_class
        from {{ this }}
        {{ partition_bound_filter('attempt_partition', '>=', cutoff_partition) }}
    ),

    carried as (
        select
            consumer_id,
            server_name,
            max(counted_attempt_number) as carried_attempt_number,
            max_by(outcome, counted_attempt_number) as carried_outcome,
            max_by(exception_class, counted_attempt_number) as carried_exception_class,
            max_by(any_type_run, counted_attempt_number) as carried_any_type_run,
            max_by(same_type_run, counted_attempt_number) as carried_same_type_run
        from {{ this }}
        {{ carry_window_filter(
            this, 'attempt_partition', cutoff_partition, ['consumer_id', 'server_name'],
            carried_keys_sql
        ) }}
        group by consumer_id, server_name
    ),
{%- endif %}

counted as (
    select * from new_attempts
    {%- if incremental %}
        union all
        select * from recent_attempts
    {%- endif %}
),

ordered as (
    select
        counted.*,
        row_number() over consumer_attempts as attempt_number_since_cutoff,
        lag(counted.outcome) over consumer_attempts as previous_outcome_since_cutoff,
        lag(counted.exception_class) over consumer_attempts
            as previous_exception_class_since_cutoff
    from counted
    window consumer_attempts as (
        partition by counted.consumer_id, counted.server_name
        order by
            counted.attempted_at,
            counted.source_file,
            counted.record_number,
            counted.attempt_key
    )
),

continued as (
    {#- The first attempt after the cutoff looks back at the state carried over it. #}
    select
        ordered.* except (
            attempt_number_since_cutoff,
            previous_outcome_since_cutoff,
            previous_exception_class_since_cutoff
        ),
        ordered.attempt_number_since_cutoff,
        {%- if incremental %}
            coalesce(carried.carried_attempt_number, 0)
            + ordered.attempt_number_since_cutoff as counted_attempt_number,
            case
                when ordered.attempt_number_since_cutoff = 1 then carried.carried_outcome
                else ordered.previous_outcome_since_cutoff
            end as previous_outcome,
            case
                when ordered.attempt_number_since_cutoff = 1
                    then carried.carried_exception_class
                else ordered.previous_exception_class_since_cutoff
            end as previous_exception_class,
            coalesce(carried.carried_any_type_run, 0) as carried_any_type_run,
            coalesce(carried.carried_same_type_run, 0) as carried_same_type_run
        {%- else %}
            ordered.attempt_number_since_cutoff as counted_attempt_number,
            ordered.previous_outcome_since_cutoff as previous_outcome,
            ordered.previous_exception_class_since_cutoff as previous_exception_class,
            0 as carried_any_type_run,
            0 as carried_same_type_run
        {%- endif %}
    {%- if incremental %}
        from ordered
        left join carried
            on
                ordered.consumer_id = carried.consumer_id
                and ordered.server_name = carried.server_name
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
            partition by continued.consumer_id, continued.server_name
            order by continued.attempt_number_since_cutoff
            rows between unbounded preceding and current row
        ) as any_type_island
    from continued
),

islands as (
    select
        flagged.*,
        sum(flagged.starts_same_type_island) over (
            partition by flagged.consumer_id, flagged.server_name
            order by flagged.attempt_number_since_cutoff
            rows between unbounded preceding and current row
        ) as same_type_island
    from flagged
),

runs as (
    select
        islands.*,
        sum(case when islands.is_failure then 1 else 0 end) over (
            partition by islands.consumer_id, islands.server_name, islands.any_type_island
            order by islands.attempt_number_since_cutoff
            rows between unbounded preceding and current row
        ) as any_type_run_in_island,
        sum(case when islands.is_failure then 1 else 0 end) over (
            partition by islands.consumer_id, islands.server_name, islands.same_type_island
            order by islands.attempt_number_since_cutoff
            rows between unbounded preceding and current row
        ) as same_type_run_in_island
    from islands
),

{#
    Island 0 is the stretch before the first reset after the cutoff: it continues the run
    carried over the cutoff (0 on a full refresh).
#}
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
        runs.counted_attempt_number,
        runs.previous_outcome,
        runs.previous_exception_class,
        runs.starts_same_type_island,
        runs.any_type_island,
        runs.same_type_island,
        runs.any_type_run_in_island
        + case when runs.any_type_island = 0 then runs.carried_any_type_run else 0 end
            as any_type_run,
        runs.same_type_run_in_island
        + case when runs.same_type_island = 0 then runs.carried_same_type_run else 0 end
            as same_type_run,
        {{ time_bucket('runs.attempted_at', partition_seconds) }} as attempt_partition
    from runs
)

select * from final
