with source as (
    select landed.*
    from {{ source('service_broker', 'ssb_queue_snapshots') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'service_broker' as broker_kind,
        cast(snapshot_at as timestamp) as snapshot_at,
        server_name,
        database_name,
        queue_name,
        cast(status as int) as message_status,
        cast(priority as int) as priority,
        cast(queuing_order as bigint) as queuing_order,
        cast(message_sequence_number as bigint) as message_sequence_number,
        service_name,
        service_contract_name,
        message_type_name,
        message_body,
        cast(message_enqueue_time as timestamp) as enqueued_at,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id,
        upper(trim(conversation_group_id)) as conversation_group_id,
        upper(trim(conversation_handle)) as conversation_handle,
        upper(trim(validation)) as validation
    from source
)

select
    {{ surrogate_key(
        [
            'broker_kind',
            'server_name',
            'database_name',
            'queue_name',
            'snapshot_at',
            'conversation_handle',
            'message_sequence_number',
        ]
    ) }}
        as snapshot_message_key,
    {{ message_key('service_broker') }} as message_key,
    {{ queue_key('service_broker') }} as queue_key,
    renamed.*
from renamed
