{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Per JMS consumer setting, server that ran it and message partition: its first and last
-- attempt there, every outcome counted (temporarily_unavailable too, unlike the breaker's
-- runs in int_jms__consumer_failure_runs). consumer_circuit_breakers adds the partitions up
-- into its list of consumers: servers, first and last attempt.

{#-
    Incremental like int_messages_classified: a run rebuilds only the partitions of
    int_receive_attempts_sequenced rewritten since its last run. As one row per consumer it
    would aggregate every JMS attempt of history on each run for a handful of rows, since Spark
    cannot overwrite an unpartitioned Parquet table it reads in the same statement.
#}

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

final as (
    select
        consumer_id,
        server_name,
        message_partition,
        min(attempted_at) as first_attempted_at,
        max(attempted_at) as last_attempted_at,
        max(sequenced_at) as sequenced_at
    from attempts
    where broker_kind = 'jms'
    group by consumer_id, server_name, message_partition
)

{# The partition column last, as the table stores it. #}
select
    consumer_id,
    server_name,
    first_attempted_at,
    last_attempted_at,
    sequenced_at,
    message_partition
from final
