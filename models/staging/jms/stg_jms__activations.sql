with source as (
    select landed.*
    from {{ source('jms', 'jms_activations') }} as landed
    {{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
),

renamed as (
    select
        activation_id,
        consumer_id,
        server_name,
        cast(started_at as timestamp) as started_at,
        cast(finished_at as timestamp) as finished_at,
        _source_file as source_file,
        cast(_record_number as bigint) as record_number,
        _batch_id as batch_id,
        lower(trim(status)) as activation_status
    from source
)

select
    {{ surrogate_key(['activation_id', 'consumer_id', 'server_name']) }} as activation_key,
    renamed.*
from renamed
