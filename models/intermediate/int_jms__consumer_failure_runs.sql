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
    where
        broker_kind = 'jms'
        and not is_temporarily_unavailable
),

ordered as (
    select
        counted.*,
        row_number() over (
            partition by counted.consumer_id, counted.server_name
            order by
                counted.attempted_at,
                counted.source_file,
                counted.record_number,
                counted.attempt_key
        ) as counted_attempt_number,
        lag(counted.outcome) over (
            partition by counted.consumer_id, counted.server_name
            order by
                counted.attempted_at,
                counted.source_file,
                counted.record_number,
                counted.attempt_key
        ) as previous_outcome,
        lag(counted.exception_class) over (
            partition by counted.consumer_id, counted.server_name
            order by
                counted.attempted_at,
                counted.source_file,
                counted.record_number,
                counted.attempt_key
        ) as previous_exception_class
    from counted
),

flagged as (
    select
        ordered.*,
        case
            when ordered.is_success then 1
            when ordered.previous_outcome is null then 1
            when ordered.previous_outcome = 'acknowledged' then 1
            when not (ordered.exception_class <=> ordered.previous_exception_class) then 1
            else 0
        end as starts_same_type_island,
        sum(case when ordered.is_success then 1 else 0 end) over (
            partition by ordered.consumer_id, ordered.server_name
            order by ordered.counted_attempt_number
            rows between unbounded preceding and current row
        ) as any_type_island
    from ordered
),

islands as (
    select
        flagged.*,
        sum(flagged.starts_same_type_island) over (
            partition by flagged.consumer_id, flagged.server_name
            order by flagged.counted_attempt_number
            rows between unbounded preceding and current row
        ) as same_type_island
    from flagged
)

select
    islands.*,
    sum(case when islands.is_failure then 1 else 0 end) over (
        partition by islands.consumer_id, islands.server_name, islands.any_type_island
        order by islands.counted_attempt_number
        rows between unbounded preceding and current row
    ) as any_type_run,
    sum(case when islands.is_failure then 1 else 0 end) over (
        partition by islands.consumer_id, islands.server_name, islands.same_type_island
        order by islands.counted_attempt_number
        rows between unbounded preceding and current row
    ) as same_type_run
from islands
