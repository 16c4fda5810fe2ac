-- The failure policy in force for every queue with attempts: the seed row for
-- (broker kind, queue) overrides the row for (broker kind, '*') as a whole (rules.md,
-- "Policy lookup"); dbt vars are the last resort when neither row exists. Without a row for
-- the queue, a JMS queue's max delivery attempts and redelivery delays are the ones its broker
-- applies (int_jms__queue_settings_resolved), where the broker reported them.

{#- The queues come from the attempts counted per queue and minute: every attempt is counted
    there, in far fewer rows than a distinct over every attempt would read. #}
with queues as (
    select distinct
        broker_kind,
        queue_name
    from {{ ref('int_receive_attempts_bucketed') }}
),

policies as (
    select
        {{ seed_string('policy_name') }} as policy_name,
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('queue_name') }} as queue_name,
        cast(failure_threshold as int) as failure_threshold,
        cast(max_delivery_attempts as int) as max_delivery_attempts,
        cast(permanent_error_threshold as int) as permanent_error_threshold,
        cast(validation_is_poison as boolean) as validation_is_poison,
        lower({{ seed_string('action') }}) as policy_action,
        cast(error_code as int) as error_code,
        {{ seed_string('error_description') }} as error_description,
        cast(redelivery_delay_ms as bigint) as redelivery_delay_ms,
        cast(redelivery_multiplier as double) as redelivery_multiplier,
        cast(max_redelivery_delay_ms as bigint) as max_redelivery_delay_ms,
        cast(park_delay_minutes as int) as park_delay_minutes
    from {{ ref('failure_policies') }}
),

broker_settings as (
    select
        queue_name,
        redelivery_delay_ms,
        redelivery_multiplier,
        max_redelivery_delay_ms,
        -- -1 is Artemis' "never dead-letter": the seed's number still judges the message
        case when max_delivery_attempts > 0 then max_delivery_attempts end
            as max_delivery_attempts
    from {{ ref('int_jms__queue_settings_resolved') }}
),

matched as (
    select
        queues.broker_kind,
        queues.queue_name,
        coalesce(queue_policy.policy_name, default_policy.policy_name) as policy_name,
        case
            when queue_policy.policy_name is not null then 'queue'
            when broker_settings.queue_name is not null then 'broker_settings'
            when default_policy.policy_name is not null then 'broker_kind_default'
            else 'project_vars'
        end as policy_scope,
        -- a blank number in the matching row falls back to the project default
        coalesce(
            case
                when queue_policy.policy_name is not null then queue_policy.failure_threshold
                else default_policy.failure_threshold
            end,
            {{ var('default_failure_threshold') }}
        ) as failure_threshold,
        -- a blank number in the matching row falls back to the project default
        coalesce(
            case
                when queue_policy.policy_name is not null then queue_policy.max_delivery_attempts
                else coalesce(
                    broker_settings.max_delivery_attempts, default_policy.max_delivery_attempts
                )
            end,
            {{ var('default_max_delivery_attempts') }}
        ) as max_delivery_attempts,
        case
            when queue_policy.policy_name is not null then queue_policy.permanent_error_threshold
            when default_policy.policy_name is not null
                then default_policy.permanent_error_threshold
            else {{ var('default_permanent_error_threshold') }}
        end as permanent_error_threshold,
        case
            when queue_policy.policy_name is not null then queue_policy.validation_is_poison
            when default_policy.policy_name is not null then default_policy.validation_is_poison
            else {{ var('default_validation_is_poison') }}
        end as validation_is_poison,
        case
            when queue_policy.policy_name is not null then queue_policy.policy_action
            when default_policy.policy_name is not null then default_policy.policy_action
            else '{{ var("default_policy_action") }}'
        end as policy_action,
        case
            when queue_policy.policy_name is not null then queue_policy.error_code
            when default_policy.policy_name is not null then default_policy.error_code
            else {{ var('default_error_code') }}
        end as error_code,
        case
            when queue_policy.policy_name is not null then queue_policy.error_description
            when default_policy.policy_name is not null then default_policy.error_description
            else '{{ var("default_error_description") }}'
        end as error_description,
        case
            when queue_policy.policy_name is not null then queue_policy.redelivery_delay_ms
            else coalesce(
                broker_settings.redelivery_delay_ms, default_policy.redelivery_delay_ms
            )
        end as redelivery_delay_ms,
        case
            when queue_policy.policy_name is not null then queue_policy.redelivery_multiplier
            else coalesce(
                broker_settings.redelivery_multiplier, default_policy.redelivery_multiplier
            )
        end as redelivery_multiplier,
        case
            when queue_policy.policy_name is not null then queue_policy.max_redelivery_delay_ms
            else coalesce(
                broker_settings.max_redelivery_delay_ms, default_policy.max_redelivery_delay_ms
            )
        end as max_redelivery_delay_ms,
        case
            when queue_policy.policy_name is not null then queue_policy.park_delay_minutes
            else default_policy.park_delay_minutes
        end as park_delay_minutes
    from queues
    left join policies as queue_policy
        on
            queues.broker_kind = queue_policy.broker_kind
            and queues.queue_name = queue_policy.queue_name
    left join policies as default_policy
        on
            queues.broker_kind = default_policy.broker_kind
            and default_policy.queue_name = '*'
    left join broker_settings
        on
            queues.broker_kind = 'jms'
            and queues.queue_name = broker_settings.queue_name
)

select
    {{ surrogate_key(['broker_kind', 'queue_name']) }} as queue_policy_key,
    matched.*
from matched
