select
    landed.dataset,
    landed.source_file,
    landed.record_number,
    landed.field as field_name,
    landed.reason,
    landed.original_text,
    landed._ingested_at as ingested_at,
    landed._batch_id as batch_id
from {{ source('ingest', 'raw_rejects') }} as landed
{{ committed_batches_filter('landed', source('ingest', 'ingested_files')) }}
