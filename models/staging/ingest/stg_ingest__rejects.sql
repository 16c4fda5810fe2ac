select
    dataset,
    source_file,
    record_number,
    field as field_name,
    reason,
    original_text,
    _ingested_at as ingested_at,
    _batch_id as batch_id
from {{ source('ingest', 'raw_rejects') }}
