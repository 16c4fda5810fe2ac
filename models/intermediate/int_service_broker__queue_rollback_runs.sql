-- Per Service Broker queue, its attempts in order and the run of consecutive
-- whole-transaction rollbacks after each one (rules.md, "Queues"): `rolled_back` extends
-- the run; committed, rolled_back_to_savepoint and ended_conversation reset it to 0.
-- Gaps and islands: every non-rollback attempt starts a new island; the run is the count
-- of rollbacks so far in the island.

with attempts as (
    select
        attempt_key,
        queue_key,
        server_name,
        database_name,
        queue_name,
        attempted_at,
        attempt_id,
        source_file,
        record_number,
        outcome,
        is_whole_transaction_rollback
    from {{ ref('int_receive_attempts_sequenced') }}
    where broker_kind = 'service_broker'
),

islands as (
    select
        attempts.*,
        row_number() over (
            partition by attempts.queue_key
            order by
                attempts.attempted_at,
                attempts.attempt_id,
                attempts.source_file,
                attempts.record_number,
                attempts.attempt_key
        ) as queue_attempt_number,
        sum(case when attempts.is_whole_transaction_rollback then 0 else 1 end) over (
            partition by attempts.queue_key
            order by
                attempts.attempted_at,
                attempts.attempt_id,
                attempts.source_file,
                attempts.record_number,
                attempts.attempt_key
            rows between unbounded preceding and current row
        ) as reset_island
    from attempts
)

select
    islands.*,
    sum(case when islands.is_whole_transaction_rollback then 1 else 0 end) over (
        partition by islands.queue_key, islands.reset_island
        order by islands.queue_attempt_number
        rows between unbounded preceding and current row
    ) as rollback_run
from islands
