select
    content_hash,
    dataset,
    source_file,
    file_bytes,
    loaded_records,
    rejected_records,
    _ingested_at as ingested_at,
    _batch_id as batch_id
from {{ source('ingest', 'ingested_files') }}
