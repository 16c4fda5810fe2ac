with source as (
    select landed.*
    from {{ source('jms', 'jms_receive_attempts') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'jms' as broker_kind,
        broker_name,
        address,
        queue_name,
        message_id,
        correlation_id,
        group_id,
        cast(delivery_count as int) as delivery_count,
        cast(redelivered as boolean) as is_redelivered,
        orig_address,
        orig_queue,
        message_type as message_type_name,
        consumer_id,
        server_name,
        activation_id,
        -- Spark timestamps keep microseconds: Instant.toString() nanoseconds are truncated.
        cast(attempted_at as timestamp) as attempted_at,
        exception_class,
        exception_class as error_key,
        exception_message as error_message,
        stack_trace,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _ingested_at as ingested_at,
        _batch_id as batch_id,
        lower(trim(outcome)) as outcome
    from source
)

select
    {{ surrogate_key(
        [
            'batch_id',
            'source_file',
            'record_number',
            'attempted_at',
            'broker_name',
            'queue_name',
            'message_id',
            'consumer_id',
            'server_name',
        ]
    ) }}
        as attempt_key,
    {{ message_key('jms') }} as message_key,
    {{ queue_key('jms') }} as queue_key,
    renamed.*,
    renamed.outcome in ('rolled_back', 'temporarily_unavailable') as is_failure,
    renamed.outcome = 'acknowledged' as is_success,
    renamed.outcome = 'temporarily_unavailable' as is_temporarily_unavailable
from renamed
