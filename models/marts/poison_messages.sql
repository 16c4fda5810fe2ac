-- One row per message with at least one failure: counts, last error, failure class and the
-- verdict (classification, reason) of docs/rules.md, plus whether it is still live.

{# Each effect column and how the rows of one message key combine. #}
{%- set effect_columns = {
    'dead_lettered_at': 'max',
    'first_seen_in_dlq_at': 'max',
    'is_dead_lettered_by_apply': 'max',
    'is_in_dlq_snapshot': 'max',
    'discarded_at': 'min',
    'parked_at': 'min',
    'has_out_of_order_processing': 'max',
    'expected_redelivery_delay_ms': 'max',
    'expected_redelivery_at': 'max',
    'attempt_ended_at': 'min',
    'apply_ended_at': 'min',
} -%}
{#- Each effect source (a CTE below) and the effect columns it provides. -#}
{%- set effect_sources = [
    ('dead_lettered', [
        'dead_lettered_at', 'first_seen_in_dlq_at', 'is_dead_lettered_by_apply',
        'is_in_dlq_snapshot',
    ]),
    ('discarded', ['discarded_at']),
    ('parked', ['parked_at']),
    ('ordering', ['has_out_of_order_processing']),
    ('redelivery', ['expected_redelivery_delay_ms', 'expected_redelivery_at']),
    ('message_conversations_ended', ['attempt_ended_at', 'apply_ended_at']),
] -%}
{#- Per source, its row of every effect column: null where it has none, which the union
    widens to the type of the source that has it. Per column, its aggregate over one message
    key's rows. -#}
{%- set effect_selects = [] -%}
{%- for source, provided in effect_sources -%}
    {%- set expressions = ['message_key'] -%}
    {%- for column in effect_columns -%}
        {%- do expressions.append(column if column in provided else 'null as ' ~ column) -%}
    {%- endfor -%}
    {%- do effect_selects.append(
        'select\n            ' ~ expressions | join(',\n            ')
        ~ '\n        from ' ~ source
    ) -%}
{%- endfor -%}
{%- set effect_aggregates = [] -%}
{%- for column, aggregate in effect_columns.items() -%}
    {%- do effect_aggregates.append(aggregate ~ '(' ~ column ~ ') as ' ~ column) -%}
{%- endfor -%}

with messages as (
    select * from {{ ref('int_messages_classified') }}
),

attempt_ended_conversations as (
    select * from {{ ref('int_service_broker__conversations_ended') }}
),

apply_ended_conversations as (
    select * from {{ ref('stg_ops__ended_conversations') }}
),

dead_lettered as (
    select * from {{ ref('int_messages_dead_lettered') }}
),

discarded as (
    -- discarded or parked by apply: the message left its queue
    select
        message_key,
        discarded_at
    from {{ ref('stg_ops__discarded_messages') }}
),

parked as (
    select
        message_key,
        parked_at
    from {{ ref('stg_ops__parked_messages') }}
),

ordering as (
    select
        message_key,
        has_out_of_order_processing
    from {{ ref('int_jms__message_ordering') }}
),

redelivery as (
    select
        message_key,
        expected_redelivery_delay_ms,
        expected_redelivery_at
    from {{ ref('int_jms__redelivery_schedule') }}
    where is_latest_failure
),

conversations_ended as (
    {#- A conversation's ends: one row per message partition where an attempt ended it, one
        per apply run that ended it; message_effects keeps the earliest of each kind. #}
    select
        server_name,
        database_name,
        conversation_handle,
        attempt_ended_at,
        cast(null as timestamp) as apply_ended_at
    from attempt_ended_conversations
    union all
    select
        server_name,
        database_name,
        conversation_handle,
        cast(null as timestamp) as attempt_ended_at,
        ended_at as apply_ended_at
    from apply_ended_conversations
),

message_conversations_ended as (
    select
        messages.message_key,
        conversations_ended.attempt_ended_at,
        conversations_ended.apply_ended_at
    from messages
    inner join conversations_ended
        on
            messages.server_name = conversations_ended.server_name
            and messages.database_name = conversations_ended.database_name
            and messages.conversation_handle = conversations_ended.conversation_handle
),

{#
    Aggregate before you join: what happened to each message (conversation ended,
    dead-lettered, discarded, parked, ordering, next redelivery) as one narrow row per message
    key, so the wide message rows are shuffled once, for one join, instead of once per join.
    Every source but the ledgers and the conversation ends holds at most one row per message
    key (their key tests), so max() takes that row's value; min() keeps apply's first discard
    or park and a conversation's earliest end.
#}
message_effects as (
    select
        message_key,
        {{ effect_aggregates | join(',\n        ') }}
    from (
        {{ effect_selects | join('\n        union all\n        ') }}
    ) as effects
    group by message_key
),

joined as (
    select
        messages.*,
        message_effects.dead_lettered_at,
        message_effects.first_seen_in_dlq_at,
        message_effects.has_out_of_order_processing as ordering_flag,
        message_effects.expected_redelivery_delay_ms as next_redelivery_delay_ms,
        message_effects.expected_redelivery_at as next_redelivery_at,
        coalesce(message_effects.attempt_ended_at, message_effects.apply_ended_at)
            as conversation_ended_at,
        message_effects.attempt_ended_at is not null
        or message_effects.apply_ended_at is not null
            as is_conversation_ended,
        message_effects.apply_ended_at is not null as is_conversation_ended_by_apply,
        coalesce(message_effects.is_dead_lettered_by_apply, false) as is_dead_lettered_by_apply,
        coalesce(
            message_effects.is_dead_lettered_by_apply or message_effects.is_in_dlq_snapshot,
            false
        ) as is_dead_lettered,
        message_effects.discarded_at is not null as is_discarded_by_apply,
        message_effects.parked_at is not null as is_parked_by_apply
    from messages
    left join message_effects
        on messages.message_key = message_effects.message_key
)

select
    message_key,
    broker_kind,
    server_name,
    database_name,
    broker_name,
    queue_name,
    conversation_handle,
    conversation_group_id,
    message_sequence_number,
    message_id,
    address,
    orig_address,
    orig_queue,
    group_id,
    message_type_name,
    consumer_id,
    attempt_count,
    failure_count,
    consecutive_failure_count,
    whole_transaction_rollback_count,
    distinct_error_count,
    permanent_failure_count,
    validation_failure_count,
    temporarily_unavailable_count,
    delivery_count,
    first_attempted_at,
    first_failed_at,
    last_failed_at,
    last_attempted_at,
    last_outcome,
    last_error_key,
    last_error_message,
    failure_class,
    classification,
    reason,
    failure_threshold,
    policy_name,
    policy_action,
    error_code,
    error_description,
    park_delay_minutes,
    is_conversation_ended,
    is_conversation_ended_by_apply,
    conversation_ended_at,
    is_dead_lettered,
    is_dead_lettered_by_apply,
    dead_lettered_at,
    first_seen_in_dlq_at,
    is_discarded_by_apply,
    is_parked_by_apply,
    not(
        is_conversation_ended
        or is_dead_lettered
        or is_discarded_by_apply
        or is_parked_by_apply
    ) as is_live,
    classification = 'poison'
    and not (
        is_conversation_ended
        or is_dead_lettered
        or is_discarded_by_apply
        or is_parked_by_apply
    ) as is_live_poison,
    case when broker_kind = 'jms' then coalesce(ordering_flag, false) end
        as has_out_of_order_processing,
    case
        when broker_kind = 'jms' and classification in ('retrying', 'suspect')
            then next_redelivery_delay_ms
    end as next_redelivery_delay_ms,
    case
        when broker_kind = 'jms' and classification in ('retrying', 'suspect')
            then next_redelivery_at
    end as next_redelivery_at
from joined
