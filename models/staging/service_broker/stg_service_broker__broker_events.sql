with source as (
    select landed.*
    from {{ source('service_broker', 'ssb_broker_events') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'service_broker' as broker_kind,
        cast(event_time as timestamp) as event_at,
        server_name,
        database_name,
        queue_name,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id,
        upper(trim(event_type)) as event_type
    from source
)

select
    {{ surrogate_key(
        [
            'broker_kind',
            'server_name',
            'database_name',
            'queue_name',
            'event_at',
            'event_type',
            'source_file',
            'record_number',
        ]
    ) }}
        as broker_event_key,
    {{ queue_key('service_broker') }} as queue_key,
    renamed.*,
    upper(trim(renamed.event_type)) in (
        'BROKER_QUEUE_DISABLED', 'QUEUE_DISABLED', 'BROKER:QUEUE DISABLED'
    ) as is_queue_disabled_event
from renamed
