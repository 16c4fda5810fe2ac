with source as (
    select landed.*
    from {{ source('service_broker', 'ssb_receive_attempts') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'service_broker' as broker_kind,
        server_name,
        database_name,
        queue_name,
        cast(message_sequence_number as bigint) as message_sequence_number,
        message_type_name,
        cast(attempted_at as timestamp) as attempted_at,
        cast(error_number as int) as error_number,
        cast(cast(error_number as int) as string) as error_key,
        error_message,
        reader,
        attempt_id,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _ingested_at as ingested_at,
        _batch_id as batch_id,
        upper(trim(conversation_group_id)) as conversation_group_id,
        upper(trim(conversation_handle)) as conversation_handle,
        lower(trim(outcome)) as outcome
    from source
)

select
    {{ surrogate_key(
        [
            'batch_id',
            'source_file',
            'record_number',
            'attempt_id',
            'attempted_at',
            'conversation_handle',
            'message_sequence_number',
        ]
    ) }}
        as attempt_key,
    {{ message_key('service_broker') }} as message_key,
    {{ queue_key('service_broker') }} as queue_key,
    renamed.*,
    renamed.outcome in ('rolled_back', 'rolled_back_to_savepoint') as is_failure,
    renamed.outcome = 'committed' as is_success,
    renamed.outcome = 'rolled_back' as is_whole_transaction_rollback,
    renamed.outcome = 'ended_conversation' as is_conversation_end
from renamed
