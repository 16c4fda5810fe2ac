-- Every poison/suspect message, live or not, with the queue policy that decides its action:
-- the targets of the per-message action families. A message that is not live any more keeps
-- the row of the action that removed it (status applied) and produces no new action.
-- Contract columns only (docs/marts.md); the policy comes from int_queue_policies.

with poison_messages as (
    select * from {{ ref('poison_messages') }}
),

policies as (
    select * from {{ ref('int_queue_policies') }}
),

final as (
    select
        poison_messages.message_key,
        poison_messages.broker_kind,
        poison_messages.server_name,
        poison_messages.database_name,
        poison_messages.broker_name,
        poison_messages.queue_name,
        poison_messages.conversation_handle,
        poison_messages.message_sequence_number,
        poison_messages.message_id,
        poison_messages.address,
        poison_messages.orig_address,
        poison_messages.orig_queue,
        poison_messages.consumer_id,
        poison_messages.last_failed_at,
        poison_messages.classification,
        poison_messages.reason,
        poison_messages.is_live,
        poison_messages.is_dead_lettered,
        policies.policy_name,
        policies.error_code,
        policies.error_description,
        policies.park_delay_minutes,
        coalesce(poison_messages.policy_action, policies.policy_action) as policy_action,
        poison_messages.last_failed_at
        + make_interval(0, 0, 0, 0, 0, coalesce(policies.park_delay_minutes, 0), 0)
            as park_due_at
    from poison_messages
    left join policies
        on
            poison_messages.broker_kind = policies.broker_kind
            and poison_messages.queue_name = policies.queue_name
    where poison_messages.classification in ('poison', 'suspect')
)

select * from final
