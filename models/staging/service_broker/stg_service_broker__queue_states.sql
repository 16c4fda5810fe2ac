with source as (
    select landed.*
    from {{ source('service_broker', 'ssb_queue_states') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'service_broker' as broker_kind,
        cast(snapshot_at as timestamp) as snapshot_at,
        server_name,
        database_name,
        queue_name,
        cast(is_receive_enabled as boolean) as is_receive_enabled,
        cast(is_enqueue_enabled as boolean) as is_enqueue_enabled,
        cast(is_activation_enabled as boolean) as is_activation_enabled,
        cast(is_poison_message_handling_enabled as boolean) as is_poison_message_handling_enabled,
        activation_procedure,
        cast(max_readers as int) as max_readers,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id
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
            'source_file',
            'record_number',
        ]
    ) }}
        as queue_state_key,
    {{ queue_key('service_broker') }} as queue_key,
    renamed.*
from renamed
