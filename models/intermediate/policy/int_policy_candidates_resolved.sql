{#- Read only by policy_backtest, a question asked on demand (`poisonwatch backtest` builds
    both): tagged like it, so that the production build after each ingest leaves it out
    (selectors.yml). -#}
{{ config(tags=['on_demand']) }}

-- One row per candidate failure policy and queue with attempts: the parameters a candidate
-- would apply there, looked up as int_queue_policies looks up the policy in force (a row for
-- (broker kind, queue) overrides the candidate's (broker kind, '*') row as a whole; a blank
-- threshold in the row used falls back to the project default). A candidate applies only to
-- the broker kinds it has rows for. Candidate `current` is the policy in force, always.

with queues as (
    select * from {{ ref('int_queue_policies') }}
),

candidates as (
    select
        {{ seed_string('candidate_name') }} as candidate_name,
        {{ seed_string('policy_name') }} as policy_name,
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('queue_name') }} as queue_name,
        cast(failure_threshold as int) as failure_threshold,
        cast(max_delivery_attempts as int) as max_delivery_attempts,
        cast(permanent_error_threshold as int) as permanent_error_threshold,
        cast(validation_is_poison as boolean) as validation_is_poison
    from {{ ref('candidate_policies') }}
    where {{ seed_string('candidate_name') }} <> 'current'
),

candidate_names as (
    select distinct
        candidate_name,
        broker_kind
    from candidates
),

matched as (
    select
        candidate_names.candidate_name,
        queues.broker_kind,
        queues.queue_name,
        coalesce(queue_candidate.policy_name, default_candidate.policy_name) as policy_name,
        case
            when queue_candidate.policy_name is not null then 'queue'
            else 'broker_kind_default'
        end as policy_scope,
        coalesce(
            case
                when queue_candidate.policy_name is not null
                    then queue_candidate.failure_threshold
                else default_candidate.failure_threshold
            end,
            {{ var('default_failure_threshold') }}
        ) as failure_threshold,
        coalesce(
            case
                when queue_candidate.policy_name is not null
                    then queue_candidate.max_delivery_attempts
                else default_candidate.max_delivery_attempts
            end,
            {{ var('default_max_delivery_attempts') }}
        ) as max_delivery_attempts,
        case
            when queue_candidate.policy_name is not null
                then queue_candidate.permanent_error_threshold
            else default_candidate.permanent_error_threshold
        end as permanent_error_threshold,
        case
            when queue_candidate.policy_name is not null
                then queue_candidate.validation_is_poison
            else default_candidate.validation_is_poison
        end as validation_is_poison
    from candidate_names
    inner join queues
        on candidate_names.broker_kind = queues.broker_kind
    left join candidates as queue_candidate
        on
            candidate_names.candidate_name = queue_candidate.candidate_name
            and queues.broker_kind = queue_candidate.broker_kind
            and queues.queue_name = queue_candidate.queue_name
    left join candidates as default_candidate
        on
            candidate_names.candidate_name = default_candidate.candidate_name
            and queues.broker_kind = default_candidate.broker_kind
            and default_candidate.queue_name = '*'
    where coalesce(queue_candidate.policy_name, default_candidate.policy_name) is not null
),

in_force as (
    select
        'current' as candidate_name,
        broker_kind,
        queue_name,
        policy_name,
        policy_scope,
        failure_threshold,
        max_delivery_attempts,
        permanent_error_threshold,
        validation_is_poison
    from queues
),

final as (
    select
        {{ surrogate_key(['candidate_name', 'broker_kind', 'queue_name']) }}
            as candidate_queue_key,
        *
    from (
        select * from in_force
        union all
        select * from matched
    ) as unioned
)

select * from final
