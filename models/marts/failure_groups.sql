-- Failures grouped by error number / exception class and normalised message (GUIDs, quoted
-- literals and numbers replaced), as ServiceControl groups failed messages.

with failures as (
    select
        broker_kind,
        coalesce(error_key, '') as error_key,
        failure_class,
        error_message,
        {{ normalize_error_message('coalesce(error_message, \'\')') }} as normalized_message,
        message_key,
        queue_key,
        attempted_at,
        attempt_number
    from {{ ref('int_receive_attempts_sequenced') }}
    where is_failure
)

select
    {{ surrogate_key(['broker_kind', 'error_key', 'normalized_message']) }} as failure_group_id,
    broker_kind,
    nullif(error_key, '') as error_key,
    {{ failure_class_from_rank('max(' ~ failure_class_rank('failure_class') ~ ')') }}
        as failure_class,
    normalized_message,
    min_by(error_message, attempted_at) as example_message,
    count(*) as failure_count,
    count(distinct message_key) as message_count,
    count(distinct queue_key) as queue_count,
    min(attempted_at) as first_seen_at,
    max(attempted_at) as last_seen_at
from failures
group by broker_kind, error_key, normalized_message
