{#- A question about all of history, asked on demand (`poisonwatch backtest` builds it): tagged
    so that the production build after each ingest leaves it out (selectors.yml). -#}
{{ config(tags=['on_demand']) }}

-- One row per candidate circuit-breaker setting and JMS consumer setting: the consumer's
-- failure runs replayed under the candidate. A failure run is a stretch of counted failures
-- on one server between acknowledgements (int_jms__consumer_failure_runs). The candidate's
-- fuse reports on a run at its first failure where breaker_server_reports holds with the
-- candidate's M (the rule consumer_circuit_breakers applies); the consumer trips when runs
-- on breaker_reports_needed(mode) distinct servers report (ANY 1, MANY 2), as
-- consumer_circuit_breakers decides over all history. Then each reporting run is a trip:
-- on a permanent-only run (every failure of class permanent) it is a good trip; when the
-- run ended with an acknowledgement it was premature (the consumer recovered by itself).
-- Scheduled groups are not replayed.

with consumer_failure_runs as (
    select * from {{ ref('int_jms__consumer_failure_runs') }}
),

error_classes as (
    select
        {{ seed_string('error_key') }} as error_key,
        lower({{ seed_string('failure_class') }}) as failure_class
    from {{ ref('error_classes') }}
    where lower({{ seed_string('broker_kind') }}) = 'jms'
),

in_force as (
    select
        'current' as candidate_name,
        consumer_id,
        breaker_mode,
        max_consecutive_failures
    from {{ ref('consumer_circuit_breakers') }}
),

candidate_rows as (
    select
        {{ seed_string('candidate_name') }} as candidate_name,
        {{ seed_string('consumer_id') }} as consumer_id,
        cast(max_consecutive_failures as int) as max_consecutive_failures,
        upper({{ seed_string('breaker_mode') }}) as breaker_mode
    from {{ ref('candidate_consumer_policies') }}
    where {{ seed_string('candidate_name') }} <> 'current'
),

candidate_names as (
    select distinct candidate_name from candidate_rows
),

{# A consumer's own row overrides the candidate's '*' row as a whole (as in force). #}
candidates as (
    select * from in_force
    union all
    select
        candidate_names.candidate_name,
        in_force.consumer_id,
        coalesce(
            case
                when own_row.candidate_name is not null then own_row.breaker_mode
                else default_row.breaker_mode
            end,
            upper('{{ var("default_breaker_mode") }}')
        ) as breaker_mode,
        coalesce(
            case
                when own_row.candidate_name is not null then own_row.max_consecutive_failures
                else default_row.max_consecutive_failures
            end,
            {{ var('default_max_consecutive_failures') }}
        ) as max_consecutive_failures
    from candidate_names
    cross join in_force
    left join candidate_rows as own_row
        on
            candidate_names.candidate_name = own_row.candidate_name
            and in_force.consumer_id = own_row.consumer_id
    left join candidate_rows as default_row
        on
            candidate_names.candidate_name = default_row.candidate_name
            and default_row.consumer_id = '*'
),

{#
    Each consumer and server's counted attempts numbered across all of history: the model
    does not keep such a number (a late attempt would change it in every bucket after it), and
    this replay reads all of history anyway.
#}
runs as (
    select
        consumer_failure_runs.*,
        row_number() over (
            partition by consumer_failure_runs.consumer_id, consumer_failure_runs.server_name
            order by
                consumer_failure_runs.attempted_at,
                consumer_failure_runs.source_file,
                consumer_failure_runs.record_number,
                consumer_failure_runs.attempt_key
        ) as counted_attempt_number
    from consumer_failure_runs
),

run_failures as (
    select
        runs.consumer_id,
        runs.server_name,
        {# The counted attempt that started the run: it names the run within this replay. #}
        runs.counted_attempt_number - runs.any_type_run + 1 as run_start_number,
        runs.counted_attempt_number,
        runs.any_type_run,
        runs.same_type_run,
        coalesce(error_classes.failure_class, 'unknown') as failure_class
    from runs
    left join error_classes
        on runs.exception_class = error_classes.error_key
    where runs.is_failure
),

acknowledgements as (
    select
        consumer_id,
        server_name,
        counted_attempt_number
    from runs
    where is_success
),

failure_runs as (
    select
        run_failures.consumer_id,
        run_failures.server_name,
        run_failures.run_start_number,
        max(run_failures.counted_attempt_number) as run_end_number,
        count(*) as run_failure_count,
        bool_and(run_failures.failure_class = 'permanent') as is_permanent_only,
        array_sort(collect_list(struct(
            run_failures.any_type_run,
            run_failures.same_type_run
        ))) as failures
    from run_failures
    group by run_failures.consumer_id, run_failures.server_name, run_failures.run_start_number
),

ended_runs as (
    select
        failure_runs.*,
        acknowledgements.counted_attempt_number is not null as is_ended_by_success
    from failure_runs
    left join acknowledgements
        on
            failure_runs.consumer_id = acknowledgements.consumer_id
            and failure_runs.server_name = acknowledgements.server_name
            and failure_runs.run_end_number + 1 = acknowledgements.counted_attempt_number
),

replayed as (
    select
        candidates.candidate_name,
        candidates.consumer_id,
        ended_runs.server_name,
        ended_runs.run_failure_count,
        ended_runs.is_permanent_only,
        ended_runs.is_ended_by_success,
        element_at(filter(
            ended_runs.failures,
            f -> {{ breaker_server_reports(
                'f.same_type_run', 'f.any_type_run', 'candidates.max_consecutive_failures'
            ) }}
        ), 1).any_type_run as failures_before_report
    from candidates
    inner join ended_runs
        on candidates.consumer_id = ended_runs.consumer_id
),

per_consumer as (
    select
        candidate_name,
        consumer_id,
        count(*) as failure_runs,
        size(collect_set(case when failures_before_report is not null then server_name end))
            as reporting_server_count,
        count_if(failures_before_report is not null) as reporting_runs,
        count_if(failures_before_report is not null and is_permanent_only)
            as reporting_permanent_runs,
        count_if(failures_before_report is not null and is_ended_by_success)
            as reporting_premature_runs,
        coalesce(sum(failures_before_report), 0) as failures_before_reports,
        coalesce(
            sum(
                case
                    when is_permanent_only then coalesce(failures_before_report, run_failure_count)
                end
            ),
            0
        ) as permanent_failures_before_reports,
        coalesce(sum(case when is_permanent_only then run_failure_count end), 0)
            as permanent_run_failures
    from replayed
    group by candidate_name, consumer_id
),

joined as (
    select
        {{ surrogate_key(['candidates.candidate_name', 'candidates.consumer_id']) }}
            as breaker_backtest_key,
        candidates.candidate_name,
        candidates.consumer_id,
        candidates.breaker_mode,
        candidates.max_consecutive_failures,
        {{ breaker_same_type_threshold('candidates.max_consecutive_failures') }}
            as same_type_threshold,
        coalesce(per_consumer.failure_runs, 0) as failure_runs,
        coalesce(per_consumer.reporting_server_count, 0) as reporting_server_count,
        coalesce(per_consumer.reporting_server_count, 0)
        >= {{ breaker_reports_needed('candidates.breaker_mode') }} as is_tripped,
        coalesce(per_consumer.reporting_runs, 0) as reporting_runs,
        coalesce(per_consumer.reporting_permanent_runs, 0) as reporting_permanent_runs,
        coalesce(per_consumer.reporting_premature_runs, 0) as reporting_premature_runs,
        coalesce(per_consumer.failures_before_reports, 0) as failures_before_reports,
        coalesce(per_consumer.permanent_failures_before_reports, 0)
            as permanent_failures_before_reports,
        coalesce(per_consumer.permanent_run_failures, 0) as permanent_run_failures
    from candidates
    left join per_consumer
        on
            candidates.candidate_name = per_consumer.candidate_name
            and candidates.consumer_id = per_consumer.consumer_id
),

counted as (
    select
        breaker_backtest_key,
        candidate_name,
        consumer_id,
        breaker_mode,
        max_consecutive_failures,
        same_type_threshold,
        failure_runs,
        reporting_server_count,
        is_tripped,
        case when is_tripped then reporting_runs else 0 end as trips,
        case when is_tripped then reporting_permanent_runs else 0 end
            as trips_on_permanent_runs,
        case when is_tripped then reporting_premature_runs else 0 end as premature_trips,
        case when is_tripped then failures_before_reports else 0 end
            as failed_deliveries_before_trips,
        {# Failed deliveries on permanent-only runs that a trip did not spare. #}
        case
            when is_tripped then permanent_failures_before_reports
            else permanent_run_failures
        end as wasted_deliveries
    from joined
),

{#
    The recommendation per consumer: among candidates with no premature trip, the fewest
    wasted deliveries on permanent-only runs, then the largest M (the gentlest fuse), then
    the name.
#}
final as (
    select
        counted.*,
        counted.premature_trips = 0
        and row_number() over (
            partition by counted.consumer_id
            order by
                case when counted.premature_trips = 0 then 0 else 1 end asc,
                counted.wasted_deliveries asc,
                counted.max_consecutive_failures desc,
                counted.candidate_name asc
        ) = 1 as is_recommended
    from counted
)

select * from final
