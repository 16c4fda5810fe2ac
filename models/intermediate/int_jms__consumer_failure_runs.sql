-- Per JMS consumer setting and server, its counted attempts in order with the circuit
-- breaker's runs after each one (rules.md, "Circuit breakers"): temporarily_unavailable
-- attempts are left out (they neither count nor reset); acknowledged resets both runs;
-- rolled_back grows the any-type run, and the same-type run when its exception class
-- equals the previous counted failure's (else it restarts at 1).
-- Gaps and islands: an acknowledgement, or a failure whose class differs from the previous
-- counted attempt's, starts a new island.

with counted as (
    select
        attempt_key,
        consumer_id,
        server_name,
        attempted_at,
        source_file,
        record_number,
        outcome,
        is_failure,
        is_success,
        error_key as exception_class
    from {{ ref('int_receive_attempts_sequenced') }}
    where broker_kind = 'jms'
        and not is_temporarily_unavailable
),

ordered as (
    select
        counted.*,
        row_number() over (
            partition by consumer_id, server_name
            order by attempted_at, source_file, record_number, attempt_key
        ) as counted_attempt_number,
        lag(outcome) over (
            partition by consumer_id, server_name
            order by attempted_at, source_file, record_number, attempt_key
        ) as previous_outcome,
        lag(exception_class) over (
            partition by consumer_id, server_name
            order by attempted_at, source_file, record_number, attempt_key
        ) as previous_exception_class
    from counted
),

flagged as (
    select
        ordered.*,
        case
            when is_success then 1
            when previous_outcome is null then 1
            when previous_outcome = 'acknowledged' then 1
            when not (exception_class <=> previous_exception_class) then 1
            else 0
        end as starts_same_type_island,
        sum(case when is_success then 1 else 0 end) over (
            partition by consumer_id, server_name
            order by counted_attempt_number
            rows between unbounded preceding and current row
        ) as any_type_island
    from ordered
),

islands as (
    select
        flagged.*,
        sum(starts_same_type_island) over (
            partition by consumer_id, server_name
            order by counted_attempt_number
            rows between unbounded preceding and current row
        ) as same_type_island
    from flagged
)

select
    islands.*,
    sum(case when is_failure then 1 else 0 end) over (
        partition by consumer_id, server_name, any_type_island
        order by counted_attempt_number
        rows between unbounded preceding and current row
    ) as any_type_run,
    sum(case when is_failure then 1 else 0 end) over (
        partition by consumer_id, server_name, same_type_island
        order by counted_attempt_number
        rows between unbounded preceding and current row
    ) as same_type_run
from islands
