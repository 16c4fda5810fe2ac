{{
    config(
        pre_hook=[
            "create database if not exists " ~ var('ops_database', 'poisonwatch_ops'),
            "create table if not exists " ~ var('ops_database', 'poisonwatch_ops') ~ ".replay_requests (request_id string, broker_name string, queue_name string, message_id string, requested_by string, requested_at timestamp, note string) using " ~ var('file_format', 'parquet'),
        ]
    )
}}

-- One row per remediation action (issue 4, docs/marts.md). The statements are built by the
-- macros in macros/remediation from validated, quoted values; a row whose target fails
-- validation keeps a null statement, a `review_reason`, and is never applied.
-- `action_id` = sha2 of type, target keys and policy: the same data gives the same ids, so
-- an action recorded in the ops ledger `action_log` shows `applied` (or `failed`, when a live
-- broker could not run it) and is not planned again.

{%- set review_types = ['inspect_message'] %}

with policies as (
    select * from {{ ref('int_queue_policies') }}
),

action_log as (
    -- The first committed application of each action (apply writes one row per action).
    select
        action_id,
        min(applied_at) as applied_at,
        min_by(run_id, applied_at) as run_id,
        min_by(outcome, applied_at) as outcome
    from {{ ref('stg_ops__action_log') }}
    group by action_id
),

replay_requests as (
    select
        request_id,
        broker_name,
        queue_name,
        message_id,
        requested_at
    from {{ source('remediation_ops', 'replay_requests') }}
),

poison as (
    -- Every poison/suspect message, live or not: a message that is not live any more keeps the
    -- row of the action that removed it (status applied) and produces no new action.
    -- Contract columns only (docs/marts.md); the policy comes from int_queue_policies.
    select
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
        coalesce(poison_messages.policy_action, policies.policy_action) as policy_action
    from {{ ref('poison_messages') }} as poison_messages
    left join policies
        on
            poison_messages.broker_kind = policies.broker_kind
            and poison_messages.queue_name = policies.queue_name
    where poison_messages.classification in ('poison', 'suspect')
),

conversations as (
    select
        server_name,
        database_name,
        queue_name,
        upper(conversation_handle) as conversation_handle,
        max(messages_discarded_on_end) as messages_discarded_on_end
    from {{ ref('poison_conversations') }}
    group by server_name, database_name, queue_name, upper(conversation_handle)
),

-- Service Broker ----------------------------------------------------------------------

sb_end_conversation as (
    select
        'end_conversation' as action_type,
        'service_broker' as broker_kind,
        poison.server_name,
        poison.database_name,
        poison.queue_name,
        poison.conversation_handle,
        min(poison.message_sequence_number) as message_sequence_number,
        max(poison.policy_name) as policy_name,
        max(coalesce(poison.error_code, 500)) as error_code,
        max(coalesce(poison.error_description, 'Unable to process message.')) as error_description,
        min_by(poison.reason, poison.message_sequence_number) as reason,
        bool_or(poison.is_live) as is_live,
        max(poison.last_failed_at) as last_failed_at
    from poison
    where
        poison.broker_kind = 'service_broker'
        and poison.classification = 'poison'
        and poison.reason != 'disposable'
        and poison.policy_action = 'end_conversation'
    group by poison.server_name, poison.database_name, poison.queue_name, poison.conversation_handle
),

sb_message_actions as (
    -- Per-message Service Broker actions: discard (disposable), park, dead_letter, inspect.
    select
        poison.*,
        case
            when poison.classification = 'suspect' then 'inspect_message'
            when poison.reason = 'disposable' then 'discard'
            else poison.policy_action
        end as action_type
    from poison
    where
        poison.broker_kind = 'service_broker'
        and (
            poison.classification = 'suspect'
            or poison.reason = 'disposable'
            or poison.policy_action in ('park', 'dead_letter')
        )
),

sb_actions as (
    select
        action_type,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        queue_name,
        upper(conversation_handle) as conversation_handle,
        message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        cast(null as string) as consumer_id,
        cast(null as string) as scheduled_group,
        reason,
        policy_name,
        {{ poisonwatch.end_conversation_statement(
            'database_name',
            'conversation_handle',
            'error_code',
            'error_description'
        ) }}
            as statement,
        'tsql' as statement_language,
        error_code,
        error_description,
        cast(null as int) as park_delay_minutes,
        cast(null as timestamp) as due_at,
        is_live as is_needed,
        case
            when not {{ poisonwatch.is_guid('conversation_handle') }}
                then 'invalid_target: conversation_handle is not a GUID'
            when {{ poisonwatch.tsql_quote_identifier('database_name') }} is null
                then 'invalid_target: database_name is not a valid identifier'
            when cast(coalesce(error_code, 500) as int) <= 0
                then 'invalid_policy: error_code must be positive'
        end as invalid_reason,
        cast(null as string) as request_id,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            policy_name,
            cast(coalesce(error_code, 500) as string),
            coalesce(error_description, 'Unable to process message.'),
            '{{ var("sb_cleanup_procedure", "dbo.ClearMessageTracking") }}'
        ) as policy_keys
    from sb_end_conversation

    union all

    select
        action_type,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        queue_name,
        upper(conversation_handle) as conversation_handle,
        message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        cast(null as string) as consumer_id,
        cast(null as string) as scheduled_group,
        reason,
        policy_name,
        case action_type
            when 'inspect_message'
                then
                    {{ poisonwatch.inspect_message_statement(
                        'database_name',
                        'queue_name',
                        'conversation_handle'
                    ) }}
            when 'discard'
                then
                    {{ poisonwatch.receive_message_statement(
                        'database_name',
                        'queue_name',
                        'conversation_handle',
                        'message_sequence_number'
                    ) }}
            when 'park'
                then
                    {{ poisonwatch.receive_message_statement(
                        'database_name',
                        'queue_name',
                        'conversation_handle',
                        'message_sequence_number',
                        target_table=var('sb_holding_table', 'dbo.PoisonwatchParkedMessages'),
                        delay_minutes='park_delay_minutes'
                    ) }}
            when 'dead_letter'
                then
                    {{ poisonwatch.receive_message_statement(
                        'database_name',
                        'queue_name',
                        'conversation_handle',
                        'message_sequence_number',
                        target_table=var('sb_dead_letter_table', 'dbo.PoisonwatchDeadLetters')
                    ) }}
        end as statement,
        'tsql' as statement_language,
        cast(null as int) as error_code,
        cast(null as string) as error_description,
        case when action_type = 'park' then park_delay_minutes end as park_delay_minutes,
        case
            when action_type = 'park'
                then
                    last_failed_at
                    + make_interval(0, 0, 0, 0, 0, coalesce(park_delay_minutes, 0), 0)
        end as due_at,
        is_live as is_needed,
        case
            when not {{ poisonwatch.is_guid('conversation_handle') }}
                then 'invalid_target: conversation_handle is not a GUID'
            when {{ poisonwatch.tsql_queue_path('database_name', 'queue_name') }} is null
                then 'invalid_target: database or queue name is not a valid identifier'
            when message_sequence_number is null
                then 'invalid_target: message_sequence_number is missing'
            when action_type = 'park' and park_delay_minutes is null
                then 'invalid_policy: park_delay_minutes is missing'
        end as invalid_reason,
        cast(null as string) as request_id,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            policy_name,
            case when action_type = 'park' then cast(park_delay_minutes as string) end,
            case
                when
                    action_type = 'park'
                    then '{{ var("sb_holding_table", "dbo.PoisonwatchParkedMessages") }}'
            end,
            case
                when
                    action_type = 'dead_letter'
                    then '{{ var("sb_dead_letter_table", "dbo.PoisonwatchDeadLetters") }}'
            end
        ) as policy_keys
    from sb_message_actions
),

removals_by_queue as (
    -- Actions that take a poison message out of a Service Broker queue: re-enabling a disabled
    -- queue comes after them (seed 001's order).
    select
        server_name,
        database_name,
        queue_name,
        max(policy_name) as policy_name,
        sort_array(
            collect_set(
                {{ surrogate_key(
                    [
                        'action_type',
                        'server_name',
                        'database_name',
                        'queue_name',
                        'conversation_handle',
                        'message_sequence_number',
                    ]
                ) }}
            )
        ) as removal_keys,
        bool_or(is_needed) as is_needed
    from sb_actions
    where
        action_type in ('end_conversation', 'discard', 'park', 'dead_letter')
        and invalid_reason is null
    group by server_name, database_name, queue_name
),

disabled_queues as (
    select
        server_name,
        database_name,
        queue_name
    from {{ ref('queue_health') }}
    where
        broker_kind = 'service_broker'
        and is_latest_snapshot
        and is_disabled
),

sb_re_enable as (
    select
        're_enable_queue' as action_type,
        'service_broker' as broker_kind,
        removals_by_queue.server_name,
        removals_by_queue.database_name,
        cast(null as string) as broker_name,
        removals_by_queue.queue_name,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        cast(null as string) as consumer_id,
        cast(null as string) as scheduled_group,
        'queue_disabled' as reason,
        removals_by_queue.policy_name,
        {{ poisonwatch.re_enable_queue_statement(
            'removals_by_queue.database_name',
            'removals_by_queue.queue_name'
        ) }}
            as statement,
        'tsql' as statement_language,
        cast(null as int) as error_code,
        cast(null as string) as error_description,
        cast(null as int) as park_delay_minutes,
        cast(null as timestamp) as due_at,
        removals_by_queue.is_needed,
        case
            when
                {{ poisonwatch.tsql_queue_path(
                    'removals_by_queue.database_name',
                    'removals_by_queue.queue_name'
                ) }} is null
                then 'invalid_target: database or queue name is not a valid identifier'
        end as invalid_reason,
        cast(null as string) as request_id,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        -- Tied to the poison it follows: the same removals give the same id.
        removals_by_queue.removal_keys as policy_keys
    from removals_by_queue
    inner join disabled_queues
        on
            removals_by_queue.server_name = disabled_queues.server_name
            and removals_by_queue.database_name = disabled_queues.database_name
            and removals_by_queue.queue_name = disabled_queues.queue_name
),

-- JMS ---------------------------------------------------------------------------------

jms_message_actions as (
    select
        poison.*,
        case
            when poison.reason = 'disposable' then 'discard'
            else poison.policy_action
        end as action_type
    from poison
    where
        poison.broker_kind = 'jms'
        and poison.classification = 'poison'
        and (
            poison.reason = 'disposable'
            or poison.policy_action in ('dead_letter', 'park')
        )
),

jms_actions as (
    select
        action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        broker_name,
        queue_name,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        message_id,
        orig_address,
        orig_queue,
        consumer_id,
        cast(null as string) as scheduled_group,
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
                            "concat(queue_name, '" ~ var('jms_park_queue_suffix', '.parked') ~ "')",
                        ]
                    ) }}
        end as statement,
        'artemis_jolokia' as statement_language,
        cast(null as int) as error_code,
        cast(null as string) as error_description,
        case when action_type = 'park' then park_delay_minutes end as park_delay_minutes,
        case
            when action_type = 'park'
                then
                    last_failed_at
                    + make_interval(0, 0, 0, 0, 0, coalesce(park_delay_minutes, 0), 0)
        end as due_at,
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
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            policy_name,
            case when action_type = 'park' then cast(park_delay_minutes as string) end,
            case when action_type = 'park' then '{{ var("jms_park_queue_suffix", ".parked") }}' end
        ) as policy_keys
    from jms_message_actions
),

dlq as (
    select * from {{ ref('dlq_messages') }}
    where
        broker_kind = 'jms'
        and (is_in_dlq_snapshot or is_dead_lettered_by_apply)
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

jms_retry as (
    -- retry_from_dlq: one review-only row per DLQ message; an operator's request
    -- (`poisonwatch replay`, a replay_requests row) turns it into an applicable action.
    select
        'retry_from_dlq' as action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        dlq.broker_name,
        dlq.queue_name,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        dlq.message_id,
        dlq.orig_address,
        dlq.orig_queue,
        cast(null as string) as consumer_id,
        cast(null as string) as scheduled_group,
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
        cast(null as int) as error_code,
        cast(null as string) as error_description,
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
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(dlq.request_id) as policy_keys
    from dlq_replay_requests as dlq
),

breakers as (
    select * from {{ ref('consumer_circuit_breakers') }}
    where is_tripped
),

jms_disable as (
    select
        'disable_consumer' as action_type,
        'jms' as broker_kind,
        cast(null as string) as server_name,
        cast(null as string) as database_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        consumer_id,
        scheduled_group,
        trip_reason as reason,
        concat('breaker_', lower(breaker_mode), '_m', cast(max_consecutive_failures as string))
            as policy_name,
        {{ poisonwatch.agent_command(
            'disable_consumer',
            {'consumer_id': 'consumer_id', 'scheduled_group': 'scheduled_group', 'reason': 'trip_reason'}
        ) }}
            as statement,
        'agent_command' as statement_language,
        cast(null as int) as error_code,
        cast(null as string) as error_description,
        cast(null as int) as park_delay_minutes,
        cast(null as timestamp) as due_at,
        not coalesce(is_disabled_by_apply, false) as is_needed,
        case when consumer_id is null then 'invalid_target: consumer_id is missing' end
            as invalid_reason,
        cast(null as string) as request_id,
        cast(null as string) as activation_id,
        cast(null as string) as purge_scope,
        cast(null as timestamp) as purge_before,
        cast(null as bigint) as purge_record_count,
        array(
            trip_reason, breaker_mode, cast(max_consecutive_failures as string), scheduled_group
        ) as policy_keys
    from breakers
),

-- Failure-log retention (seed 002) ------------------------------------------------------

last_activations as (
    -- The last completed activation per consumer setting and server: `running` is not a
    -- completion status.
    select
        consumer_id,
        server_name,
        max_by(activation_id, started_at) as activation_id,
        max_by(activation_status, started_at) as activation_status,
        max(started_at) as started_at
    from {{ ref('stg_jms__activations') }}
    where activation_status in ('succeeded', 'failed')
    group by consumer_id, server_name
),

purge_scopes as (
    select
        consumer_id,
        server_name,
        activation_id,
        activation_status,
        case activation_status when 'succeeded' then 'activation' else 'older_than' end
            as purge_scope,
        case
            when activation_status = 'failed'
                then
                    started_at
                    - make_interval(0, 0, 0, {{ var('failure_log_retention_days', 7) }}, 0, 0, 0)
        end as purge_before
    from last_activations
),

purge_counts as (
    select
        purge_scopes.consumer_id,
        purge_scopes.server_name,
        purge_scopes.activation_id,
        purge_scopes.purge_scope,
        purge_scopes.purge_before,
        count(*) as purge_record_count
    from purge_scopes
    inner join {{ ref('stg_jms__receive_attempts') }} as attempts
        on
            purge_scopes.consumer_id = attempts.consumer_id
            and purge_scopes.server_name = attempts.server_name
            and attempts.is_failure
            and (
                (
                    purge_scopes.purge_scope = 'activation'
                    and purge_scopes.activation_id = attempts.activation_id
                )
                or (
                    purge_scopes.purge_scope = 'older_than'
                    and purge_scopes.purge_before > attempts.attempted_at
                )
            )
    group by
        purge_scopes.consumer_id,
        purge_scopes.server_name,
        purge_scopes.activation_id,
        purge_scopes.purge_scope,
        purge_scopes.purge_before
),

jms_purge as (
    select
        'purge_failure_log' as action_type,
        'jms' as broker_kind,
        server_name,
        cast(null as string) as database_name,
        cast(null as string) as broker_name,
        cast(null as string) as queue_name,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        consumer_id,
        cast(null as string) as scheduled_group,
        case purge_scope
            when 'activation' then 'last_activation_succeeded'
            else 'last_activation_failed'
        end as reason,
        'failure_log_retention_{{ var("failure_log_retention_days", 7) }}d' as policy_name,
        {{ poisonwatch.agent_command(
            'purge_failure_log',
            {'consumer_id': 'consumer_id', 'server_name': 'server_name', 'activation_id': 'activation_id', 'scope': 'purge_scope', 'before': 'purge_before'}
        ) }}
            as statement,
        'agent_command' as statement_language,
        cast(null as int) as error_code,
        cast(null as string) as error_description,
        cast(null as int) as park_delay_minutes,
        cast(null as timestamp) as due_at,
        true as is_needed,
        cast(null as string) as invalid_reason,
        cast(null as string) as request_id,
        activation_id,
        purge_scope,
        purge_before,
        purge_record_count,
        array(cast({{ var('failure_log_retention_days', 7) }} as string)) as policy_keys
    from purge_counts
),

-- All actions ---------------------------------------------------------------------------

candidates as (
    select * from sb_actions
    union all
    select * from sb_re_enable
    union all
    select * from jms_actions
    union all
    select * from jms_retry
    union all
    select * from jms_disable
    union all
    select * from jms_purge
),

{#
    A DLQ holds one copy per queue a multicast message was routed to, all with one
    JMSMessageID: a retry is one action per copy, told apart by its original queue.
#}
{%- set message_id_for_key -%}
    case
        when action_type = 'retry_from_dlq' and orig_queue is not null
            then concat(message_id, '|', orig_queue)
        else message_id
    end
{%- endset %}

keyed as (
    select
        {{ surrogate_key([
            'action_type', 'broker_kind', 'server_name', 'database_name', 'broker_name',
            'queue_name', 'conversation_handle', 'message_sequence_number', message_id_for_key,
            'consumer_id', 'activation_id', 'purge_scope', 'purge_before',
            "concat_ws('|', transform(policy_keys, k -> coalesce(k, '_null_')))"
        ]) }} as action_id,
        candidates.*,
        candidates.invalid_reason is not null
        or candidates.action_type in ({{ "'" ~ review_types | join("', '") ~ "'" }})
        or (candidates.action_type = 'retry_from_dlq' and candidates.request_id is null)
            as requires_review
    from candidates
),

with_collateral as (
    select
        keyed.*,
        case
            when keyed.action_type = 'end_conversation'
                then coalesce(conversations.messages_discarded_on_end, 0)
            else 0
        end as collateral_message_count
    from keyed
    left join conversations
        on
            keyed.action_type = 'end_conversation'
            and keyed.server_name = conversations.server_name
            and keyed.database_name = conversations.database_name
            and keyed.queue_name = conversations.queue_name
            and keyed.conversation_handle = conversations.conversation_handle
),

with_status as (
    select
        with_collateral.*,
        action_log.applied_at,
        action_log.run_id as applied_run_id,
        case
            when action_log.action_id is null then 'pending'
            -- a live broker could not run it (poisonwatch_ops.failed_broker_actions says why)
            when action_log.outcome = 'failed' then 'failed'
            else 'applied'
        end as status
    from with_collateral
    left join action_log
        on with_collateral.action_id = action_log.action_id
),

final as (
    select
        action_id,
        action_type,
        broker_kind,
        server_name,
        database_name,
        broker_name,
        queue_name,
        conversation_handle,
        message_sequence_number,
        message_id,
        orig_address,
        orig_queue,
        consumer_id,
        scheduled_group,
        reason,
        policy_name,
        statement_language,
        collateral_message_count,
        requires_review,
        invalid_reason as review_reason,
        due_at,
        status,
        applied_at,
        applied_run_id as run_id,
        error_code,
        error_description,
        park_delay_minutes,
        request_id,
        activation_id,
        purge_scope,
        purge_before,
        purge_record_count,
        case when invalid_reason is null then statement end as statement,
        -- Safe order for the DBA script and for apply: consumers are stopped before their
        -- messages move; per queue, review scripts first, then the removals, then the queue is
        -- turned back on.
        row_number() over (
            order by
                case broker_kind when 'service_broker' then 1 else 2 end,
                server_name, database_name, broker_name, queue_name,
                case action_type
                    when 'disable_consumer' then 0
                    when 'inspect_message' then 1
                    when 're_enable_queue' then 3
                    when 'retry_from_dlq' then 4
                    when 'purge_failure_log' then 5
                    else 2
                end,
                consumer_id, conversation_handle, message_sequence_number, message_id, action_id
        ) as sequence_in_script
    from with_status
    -- Applied actions stay visible; an action no longer needed (the message is not live any
    -- more, the consumer is already disabled) is not planned.
    where status in ('applied', 'failed') or is_needed
)

select * from final
