-- Every receive attempt of both broker kinds in one vocabulary, with its failure class and
-- its place in the sequence of attempts of its message (rules.md, "Message identity").

with service_broker_attempts as (
    select
        attempt_key,
        message_key,
        queue_key,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        cast(null as string) as address,
        queue_name,
        conversation_group_id,
        conversation_handle,
        message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        cast(null as string) as group_id,
        message_type_name,
        cast(null as string) as consumer_id,
        cast(null as string) as activation_id,
        reader,
        attempted_at,
        attempt_id,
        source_file,
        record_number,
        outcome,
        is_failure,
        is_success,
        is_whole_transaction_rollback,
        is_conversation_end,
        false as is_temporarily_unavailable,
        error_key,
        error_message,
        cast(null as int) as delivery_count,
        cast(null as boolean) as is_redelivered
    from {{ ref('stg_service_broker__receive_attempts') }}
),

jms_attempts as (
    select
        attempt_key,
        message_key,
        queue_key,
        broker_kind,
        server_name,
        cast(null as string) as database_name,
        broker_name,
        address,
        queue_name,
        cast(null as string) as conversation_group_id,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        message_id,
        orig_address,
        orig_queue,
        group_id,
        message_type_name,
        consumer_id,
        activation_id,
        cast(null as string) as reader,
        attempted_at,
        cast(null as string) as attempt_id,
        source_file,
        record_number,
        outcome,
        is_failure,
        is_success,
        false as is_whole_transaction_rollback,
        false as is_conversation_end,
        is_temporarily_unavailable,
        error_key,
        error_message,
        delivery_count,
        is_redelivered
    from {{ ref('stg_jms__receive_attempts') }}
),

attempts as (
    select * from service_broker_attempts
    union all
    select * from jms_attempts
),

error_classes as (
    select
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('error_key') }} as error_key,
        lower({{ seed_string('failure_class') }}) as failure_class
    from {{ ref('error_classes') }}
),

classified as (
    select
        attempts.*,
        case
            when not attempts.is_failure then null
            when attempts.is_temporarily_unavailable then 'transient'
            else coalesce(error_classes.failure_class, 'unknown')
        end as failure_class
    from attempts
    left join error_classes
        on
            attempts.broker_kind = error_classes.broker_kind
            and attempts.error_key = error_classes.error_key
),

sequenced as (
    select
        classified.*,
        row_number() over (
            partition by classified.message_key
            order by
                classified.attempted_at,
                classified.attempt_id,
                classified.source_file,
                classified.record_number,
                classified.attempt_key
        ) as attempt_number,
        -- successes so far: each success starts a new island of consecutive failures
        sum(case when classified.is_success then 1 else 0 end) over (
            partition by classified.message_key
            order by
                classified.attempted_at,
                classified.attempt_id,
                classified.source_file,
                classified.record_number,
                classified.attempt_key
            rows between unbounded preceding and current row
        ) as success_island
    from classified
)

select
    sequenced.*,
    sum(case when sequenced.is_failure then 1 else 0 end) over (
        partition by sequenced.message_key
        order by sequenced.attempt_number
        rows between unbounded preceding and current row
    ) as failures_so_far,
    sum(case when sequenced.is_failure then 1 else 0 end) over (
        partition by sequenced.message_key, sequenced.success_island
        order by sequenced.attempt_number
        rows between unbounded preceding and current row
    ) as consecutive_failures,
    size(collect_set(case when sequenced.is_failure then sequenced.error_key end) over (
        partition by sequenced.message_key
        order by sequenced.attempt_number
        rows between unbounded preceding and current row
    )) as distinct_errors_so_far,
    sequenced.attempt_number
    = count(*) over (partition by sequenced.message_key) as is_latest_attempt
from sequenced
