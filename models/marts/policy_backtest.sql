{#- A question about all of history, asked on demand (`poisonwatch backtest` builds it): tagged
    so that the production build after each ingest leaves it out (selectors.yml). -#}
{{ config(tags=['on_demand']) }}

-- One row per candidate failure policy, broker kind and queue: its history replayed under
-- the candidate. The decision rule is the live classification's own (poison_reason with the
-- candidate's parameters) evaluated right after each failure of each message: the first
-- failure at which it says poison is where the candidate would have decided.
-- caught: declared, and no later attempt succeeded; false_poison: declared, but a later
-- attempt committed / was acknowledged (the message would have recovered); missed: never
-- succeeded and never declared. Wasted attempts: failures spent on a caught message up to
-- and including the deciding one, on a missed one all its failures.
-- queue_disables_prevented (Service Broker): attempts that brought a queue's run of
-- whole-transaction rollbacks to var('queue_disable_rollbacks') whose message the candidate
-- declares at an earlier failure (that rollback, which completed the run, would not have
-- happened).

{%- set disable_at = var('queue_disable_rollbacks') %}

with candidates as (
    select * from {{ ref('int_policy_candidates_resolved') }}
),

messages as (
    select
        message_key,
        broker_kind,
        queue_name,
        is_disposable_type
    from {{ ref('int_messages_classified') }}
),

accumulated as (
    select * from {{ ref('int_message_failures_accumulated') }}
),

disabling_attempts as (
    select
        attempt_key,
        queue_name
    from {{ ref('int_service_broker__queue_rollback_runs') }}
    where is_whole_transaction_rollback and rollback_run = {{ disable_at }}
),

replayed as (
    select
        candidates.candidate_name,
        accumulated.message_key,
        accumulated.broker_kind,
        accumulated.queue_name,
        accumulated.failure_count,
        accumulated.last_success_attempt_number,
        accumulated.failures,
        {# The prefix ending at a failure never ends in a success. #}
        element_at(filter(
            accumulated.failures,
            f -> {{ poison_classification(poison_reason(
                broker_kind='accumulated.broker_kind',
                is_last_attempt_success='false',
                failure_count='f.failure_number',
                validation_failure_count='f.validation_failures',
                permanent_failure_count='f.permanent_failures',
                delivery_count='f.delivery_count',
                is_disposable_type='messages.is_disposable_type',
                failure_threshold='candidates.failure_threshold',
                max_delivery_attempts='candidates.max_delivery_attempts',
                permanent_error_threshold='candidates.permanent_error_threshold',
                validation_is_poison='candidates.validation_is_poison',
            )) }} = 'poison'
        ), 1) as decision
    from accumulated
    inner join messages
        on accumulated.message_key = messages.message_key
    inner join candidates
        on
            accumulated.broker_kind = candidates.broker_kind
            and accumulated.queue_name = candidates.queue_name
),

outcomes as (
    select
        replayed.candidate_name,
        replayed.message_key,
        replayed.broker_kind,
        replayed.queue_name,
        replayed.failures,
        replayed.decision,
        replayed.decision is not null as is_declared,
        coalesce(replayed.last_success_attempt_number > replayed.decision.attempt_number, false)
            as is_succeeded_after_decision,
        replayed.last_success_attempt_number is null
        or replayed.last_success_attempt_number
        < element_at(replayed.failures, -1).attempt_number as is_never_recovered,
        case
            when replayed.decision is not null then replayed.decision.failure_number
            else replayed.failure_count
        end as failures_until_decision
    from replayed
),

classified as (
    select
        outcomes.*,
        outcomes.is_declared and not outcomes.is_succeeded_after_decision as is_caught,
        outcomes.is_declared and outcomes.is_succeeded_after_decision as is_false_poison,
        not outcomes.is_declared and outcomes.is_never_recovered as is_missed
    from outcomes
),

{# Disables are rare: only the failures of messages in queues that had one are unpacked. #}
disabling_failures as (
    select
        exploded.message_key,
        exploded.failure.attempt_number as disabling_attempt_number
    from (
        select
            accumulated.message_key,
            explode(accumulated.failures) as failure
        from accumulated
        left semi join disabling_attempts as disabled_queues
            on accumulated.queue_name = disabled_queues.queue_name
        where accumulated.broker_kind = 'service_broker'
    ) as exploded
    inner join disabling_attempts
        on exploded.failure.attempt_key = disabling_attempts.attempt_key
),

disabled_outcomes as (
    select
        classified.candidate_name,
        classified.broker_kind,
        classified.queue_name,
        coalesce(
            classified.decision.attempt_number < disabling_failures.disabling_attempt_number,
            false
        ) as is_prevented
    from disabling_failures
    inner join classified
        on disabling_failures.message_key = classified.message_key
),

disables as (
    select
        candidate_name,
        broker_kind,
        queue_name,
        count(*) as queue_disables,
        count_if(is_prevented) as queue_disables_prevented
    from disabled_outcomes
    group by candidate_name, broker_kind, queue_name
),

per_queue as (
    select
        candidate_name,
        broker_kind,
        queue_name,
        count(*) as messages_with_failures,
        count_if(is_declared) as declared_poison,
        count_if(is_caught) as caught,
        count_if(is_false_poison) as false_poison,
        count_if(is_missed) as missed,
        avg(case when is_caught or is_missed then failures_until_decision end)
            as wasted_attempts_mean,
        percentile(case when is_caught or is_missed then failures_until_decision end, 0.95)
            as wasted_attempts_p95
    from classified
    group by candidate_name, broker_kind, queue_name
),

joined as (
    select
        candidates.candidate_queue_key as policy_backtest_key,
        candidates.candidate_name,
        candidates.broker_kind,
        candidates.queue_name,
        candidates.policy_name,
        candidates.failure_threshold,
        candidates.max_delivery_attempts,
        candidates.permanent_error_threshold,
        candidates.validation_is_poison,
        coalesce(per_queue.messages_with_failures, 0) as messages_with_failures,
        coalesce(per_queue.declared_poison, 0) as declared_poison,
        coalesce(per_queue.caught, 0) as caught,
        coalesce(per_queue.false_poison, 0) as false_poison,
        coalesce(per_queue.missed, 0) as missed,
        coalesce(per_queue.wasted_attempts_mean, 0.0) as wasted_attempts_mean,
        coalesce(per_queue.wasted_attempts_p95, 0.0) as wasted_attempts_p95,
        case
            when candidates.broker_kind = 'service_broker'
                then coalesce(disables.queue_disables, 0)
        end as queue_disables,
        case
            when candidates.broker_kind = 'service_broker'
                then coalesce(disables.queue_disables_prevented, 0)
        end as queue_disables_prevented
    from candidates
    left join per_queue
        on
            candidates.candidate_name = per_queue.candidate_name
            and candidates.broker_kind = per_queue.broker_kind
            and candidates.queue_name = per_queue.queue_name
    left join disables
        on
            candidates.candidate_name = disables.candidate_name
            and candidates.broker_kind = disables.broker_kind
            and candidates.queue_name = disables.queue_name
),

{#
    The recommendation per queue: among candidates with no false poison, the fewest wasted
    attempts (mean), then the fewest missed, then the most disables prevented, then the name.
#}
final as (
    select
        joined.*,
        joined.false_poison = 0
        and row_number() over (
            partition by joined.broker_kind, joined.queue_name
            order by
                case when joined.false_poison = 0 then 0 else 1 end asc,
                joined.wasted_attempts_mean asc,
                joined.missed asc,
                coalesce(joined.queue_disables_prevented, 0) desc,
                joined.candidate_name asc
        ) = 1 as is_recommended
    from joined
)

select * from final
