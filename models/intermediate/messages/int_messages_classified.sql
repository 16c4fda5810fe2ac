{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- One row per message with at least one failure: its failure counts and the verdict of
-- rules.md ("Classification", first rule that applies wins).

{#-
    Incremental like its upstream: a run re-classifies only the partitions of
    int_receive_attempts_sequenced rewritten since the last run (they hold every message a
    new attempt touched, with all its attempts). Policy seeds apply from the next run on; to
    re-classify history after editing them, run `dbt build --full-refresh`.
#}
with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

policies as (
    select * from {{ ref('int_queue_policies') }}
),

disposable_types as (
    select distinct
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('queue_name') }} as queue_name,
        {{ seed_string('message_type_name') }} as message_type_name
    from {{ ref('disposable_message_types') }}
),

messages as (
    select
        message_key,
        max(broker_kind) as broker_kind,
        max(server_name) as server_name,
        max(database_name) as database_name,
        max(broker_name) as broker_name,
        max(queue_name) as queue_name,
        max(conversation_handle) as conversation_handle,
        max_by(conversation_group_id, attempt_number) as conversation_group_id,
        max(message_sequence_number) as message_sequence_number,
        max(message_id) as message_id,
        max_by(address, attempt_number) as address,
        max_by(orig_address, attempt_number) as orig_address,
        max_by(orig_queue, attempt_number) as orig_queue,
        max_by(group_id, attempt_number) as group_id,
        max_by(message_type_name, case when message_type_name is not null then attempt_number end)
            as message_type_name,
        max_by(consumer_id, attempt_number) as consumer_id,
        count(*) as attempt_count,
        count_if(is_failure) as failure_count,
        max_by(consecutive_failures, attempt_number) as consecutive_failure_count,
        count_if(is_whole_transaction_rollback) as whole_transaction_rollback_count,
        {#- A set per message, not count(distinct): a distinct aggregate among the others
            makes Spark expand every row once per distinct group. #}
        size(collect_set(case when is_failure then error_key end)) as distinct_error_count,
        count_if(failure_class = 'permanent') as permanent_failure_count,
        count_if(failure_class = 'validation') as validation_failure_count,
        count_if(is_temporarily_unavailable) as temporarily_unavailable_count,
        max(case when is_failure then delivery_count end) as max_failed_delivery_count,
        max({{ failure_class_rank('failure_class') }}) as failure_class_rank,
        min(case when is_failure then attempted_at end) as first_failed_at,
        max(case when is_failure then attempted_at end) as last_failed_at,
        min(attempted_at) as first_attempted_at,
        max(attempted_at) as last_attempted_at,
        max_by(outcome, attempt_number) as last_outcome,
        max_by(is_success, attempt_number) as is_last_attempt_success,
        max_by(error_key, case when is_failure then attempt_number end) as last_error_key,
        max_by(error_message, case when is_failure then attempt_number end) as last_error_message,
        max(case when is_success then attempted_at end) as last_succeeded_at,
        count_if(is_conversation_end) > 0 as has_conversation_end_attempt,
        max(sequenced_at) as sequenced_at,
        max(message_partition) as message_partition
    from attempts
    group by message_key
    having count_if(is_failure) > 0
),

with_policy as (
    select
        messages.*,
        {{ failure_class_from_rank('messages.failure_class_rank') }} as failure_class,
        case
            when messages.broker_kind = 'jms'
                then
                    greatest(
                        messages.failure_count, coalesce(messages.max_failed_delivery_count, 0)
                    )
        end as delivery_count,
        policies.policy_name,
        policies.policy_scope,
        policies.failure_threshold as policy_failure_threshold,
        policies.max_delivery_attempts,
        policies.permanent_error_threshold,
        policies.validation_is_poison,
        policies.policy_action,
        policies.error_code,
        policies.error_description,
        policies.redelivery_delay_ms,
        policies.redelivery_multiplier,
        policies.max_redelivery_delay_ms,
        policies.park_delay_minutes,
        coalesce(queue_disposable.message_type_name, any_queue_disposable.message_type_name)
        is not null as is_disposable_type
    from messages
    left join policies
        on
            messages.broker_kind = policies.broker_kind
            and messages.queue_name = policies.queue_name
    left join disposable_types as queue_disposable
        on
            messages.broker_kind = queue_disposable.broker_kind
            and messages.queue_name = queue_disposable.queue_name
            and messages.message_type_name = queue_disposable.message_type_name
    left join disposable_types as any_queue_disposable
        on
            messages.broker_kind = any_queue_disposable.broker_kind
            and any_queue_disposable.queue_name = '*'
            and messages.message_type_name = any_queue_disposable.message_type_name
),

verdicts as (
    select
        with_policy.*,
        {{ poison_reason(
            broker_kind='with_policy.broker_kind',
            is_last_attempt_success='with_policy.is_last_attempt_success',
            failure_count='with_policy.failure_count',
            validation_failure_count='with_policy.validation_failure_count',
            permanent_failure_count='with_policy.permanent_failure_count',
            delivery_count='with_policy.delivery_count',
            is_disposable_type='with_policy.is_disposable_type',
            failure_threshold='with_policy.policy_failure_threshold',
            max_delivery_attempts='with_policy.max_delivery_attempts',
            permanent_error_threshold='with_policy.permanent_error_threshold',
            validation_is_poison='with_policy.validation_is_poison',
        ) }} as reason
    from with_policy
)

{# The ladder is written once (macros/policy/poison_reason.sql, shared with the backtest),
   as the reason; the classification follows from it. #}
{# rebalance: each partition written by one task (AQE splits a big one), not a file from
    every task: fewer files to write and read. #}
select /*+ rebalance(message_partition) */
    verdicts.*,
    {{ poison_classification('verdicts.reason') }} as classification,
    case
        when verdicts.broker_kind = 'jms' then verdicts.max_delivery_attempts
        when verdicts.reason = 'permanent_error' then verdicts.permanent_error_threshold
        else verdicts.policy_failure_threshold
    end as failure_threshold
from verdicts
