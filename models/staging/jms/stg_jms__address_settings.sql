with source as (
    select landed.*
    from {{ source('jms', 'jms_address_settings') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        cast(snapshot_at as timestamp) as snapshot_at,
        broker_name,
        address,
        queue_name,
        cast(max_delivery_attempts as int) as max_delivery_attempts,
        cast(redelivery_delay_ms as bigint) as redelivery_delay_ms,
        cast(redelivery_multiplier as double) as redelivery_multiplier,
        cast(max_redelivery_delay_ms as bigint) as max_redelivery_delay_ms,
        dead_letter_address,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id
    from source
)

select
    {{ surrogate_key(['snapshot_at', 'broker_name', 'queue_name']) }} as queue_settings_key,
    renamed.*
from renamed
