with source as (
    select landed.*
    from {{ source('jms', 'jms_queue_snapshots') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        'jms' as broker_kind,
        cast(snapshot_at as timestamp) as snapshot_at,
        broker_name,
        address,
        queue_name,
        message_id,
        cast(enqueued_at as timestamp) as enqueued_at,
        cast(delivery_count as int) as delivery_count,
        cast(priority as int) as priority,
        group_id,
        orig_address,
        orig_queue,
        message_type as message_type_name,
        body,
        properties,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id
    from source
)

select
    {{ surrogate_key(
        [
            'broker_kind',
            'broker_name',
            'queue_name',
            'snapshot_at',
            'message_id',
            'source_file',
            'record_number',
        ]
    ) }}
        as snapshot_message_key,
    {{ queue_key('jms') }} as queue_key,
    renamed.*,
    (
        renamed.orig_queue is not null or renamed.orig_address is not null
        or renamed.queue_name rlike '{{ var("dlq_queue_pattern") }}'
    ) as is_dead_letter_queue
from renamed
