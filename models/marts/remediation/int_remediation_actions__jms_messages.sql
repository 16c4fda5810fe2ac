-- JMS message actions (docs/remediation.md), Artemis Jolokia exec requests built by
-- artemis_command: dead_letter, discard (disposable) and park for a poison message on its
-- queue, and retry_from_dlq for each message in a DLQ — review only until an operator asks
-- for it (`poisonwatch replay`, a replay_requests row).

with targets as (
    select * from {{ ref('int_remediation_targets') }}
),

dlq as (
    select * from {{ ref('dlq_messages') }}
    where
        broker_kind = 'jms'
        and (is_in_dlq_snapshot or is_dead_lettered_by_apply)
),

replay_requests as (
    select * from {{ ref('stg_ops__replay_requests') }}
),

message_targets as (
    select
        *,
        case
            when reason = 'disposable' then 'discard'
            else policy_action
        end as action_type
    from targets
    where
        broker_kind = 'jms'
        and classification = 'poison'
        and (
            reason = 'disposable'
            or policy_action in ('dead_letter', 'park')
        )
),

message_actions as (
    select
        action_type,
        'jms' as broker_kind,
        broker_name,
        queue_name,
        message_id,
        orig_address,
        orig_queue,
        consumer_id,
        reason,
        policy_name,
        case action_type
            when 'dead_letter'
                then
                    {{ poisonwatch.artemis_command(
                        'broker_name',
                        'address',
                        'queue_name',
                        'sendMessagesToDeadLetterAddress(java.lang.String)',
                        [poisonwatch.jms_message_filter('message_id')]
                    ) }}
            when 'discard'
                then
                    {{ poisonwatch.artemis_command(
                        'broker_name',
                        'address',
                        'queue_name',
                        'removeMessages(java.lang.String)',
                        [poisonwatch.jms_message_filter('message_id')]
                    ) }}
            when 'park'
                then
                    {{ poisonwatch.artemis_command(
                        'broker_name',
                        'address',
                        'queue_name',
                        'moveMessages(java.lang.String,java.lang.String)',
                        [
                            poisonwatch.jms_message_filter('message_id'),
                            "concat(queue_name, '" ~ var('jms_park_queue_suffix') ~ "')",
                        ]
                    ) }}
        end as statement,
        'artemis_jolokia' as statement_language,
        case when action_type = 'park' then park_delay_minutes end as park_delay_minutes,
        case when action_type = 'park' then park_due_at end as due_at,
        is_live and not coalesce(is_dead_lettered, false) as is_needed,
        case
            when message_id is null or length(message_id) = 0
                then 'invalid_target: message_id is missing'
            when broker_name is null or address is null or queue_name is null
                then 'invalid_target: broker, address or queue is missing'
            when action_type = 'park' and park_delay_minutes is null
                then 'invalid_policy: park_delay_minutes is missing'
        end as invalid_reason,
        cast(null as string) as request_id,
        array(
            policy_name,
            case when action_type = 'park' then cast(park_delay_minutes as string) end,
            case when action_type = 'park' then '{{ var("jms_park_queue_suffix") }}' end
        ) as policy_keys
    from message_targets
),

dlq_replay_requests as (
    -- A copy is replayed once per stay in the DLQ: a request is served by a replay at or
    -- after it; of the requests not served yet only the earliest is an action; a copy
    -- replayed and not seen in a DLQ snapshot since then is gone from the DLQ.
    select
        dlq.broker_name,
        dlq.queue_name,
        dlq.message_id,
        dlq.orig_address,
        dlq.orig_queue,
        replay_requests.request_id,
        coalesce(dlq.last_replayed_at >= replay_requests.requested_at, false)
            as is_request_served,
        dlq.last_replayed_at is not null
        and coalesce(dlq.last_seen_in_dlq_at <= dlq.last_replayed_at, true)
            as is_replayed_and_gone,
        row_number() over (
            partition by
                dlq.broker_name,
                dlq.queue_name,
                dlq.message_id,
                dlq.orig_queue,
                coalesce(dlq.last_replayed_at >= replay_requests.requested_at, false)
            order by replay_requests.requested_at, replay_requests.request_id
        ) as pending_request_rank
    from dlq
    left join replay_requests
        on
            dlq.broker_name = replay_requests.broker_name
            and dlq.message_id = replay_requests.message_id
            and (replay_requests.queue_name is null or dlq.queue_name = replay_requests.queue_name)
),

retry_actions as (
    select
        'retry_from_dlq' as action_type,
        'jms' as broker_kind,
        dlq.broker_name,
        dlq.queue_name,
        dlq.message_id,
        dlq.orig_address,
        dlq.orig_queue,
        cast(null as string) as consumer_id,
        case
            when dlq.request_id is null then 'replay_candidate' else 'replay_requested'
        end as reason,
        cast(null as string) as policy_name,
        {{ poisonwatch.artemis_command(
            'dlq.broker_name',
            "coalesce(dlq.queue_name, 'DLQ')",
            'dlq.queue_name',
            'moveMessages(java.lang.String,java.lang.String)',
            [poisonwatch.jms_message_filter('dlq.message_id', 'dlq.orig_queue'), 'dlq.orig_queue']
        ) }}
            as statement,
        'artemis_jolokia' as statement_language,
        cast(null as int) as park_delay_minutes,
        cast(null as timestamp) as due_at,
        not dlq.is_request_served
        and dlq.pending_request_rank = 1
        and not dlq.is_replayed_and_gone as is_needed,
        case
            when dlq.orig_queue is null then 'invalid_target: the original queue is unknown'
            when
                dlq.message_id is null or length(dlq.message_id) = 0
                then 'invalid_target: message_id is missing'
        end as invalid_reason,
        dlq.request_id,
        array(dlq.request_id) as policy_keys
    from dlq_replay_requests as dlq
),

actions as (
    select * from message_actions
    union all
    select * from retry_actions
),

final as (
    -- A DLQ holds one copy per queue a multicast message was routed to, all with one
    -- JMSMessageID: a retry is one action per copy, told apart by its original queue.
    select
        {{ poisonwatch.remediation_action_columns(
            [
                'action_type', 'broker_kind', 'broker_name', 'queue_name', 'message_id',
                'orig_address', 'orig_queue', 'consumer_id', 'reason', 'policy_name',
                'statement', 'statement_language', 'park_delay_minutes', 'due_at', 'is_needed',
                'invalid_reason', 'request_id', 'policy_keys',
            ],
            key_message_id="case
                when action_type = 'retry_from_dlq' and orig_queue is not null
                    then concat(" ~ poisonwatch.key_text('message_id') ~ ", '|', "
                    ~ poisonwatch.key_text('orig_queue') ~ ")
                else " ~ poisonwatch.key_text('message_id') ~ "
            end"
        ) }}
    from actions
)

select * from final
