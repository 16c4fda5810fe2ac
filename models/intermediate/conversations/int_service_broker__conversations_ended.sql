{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        meta={'tests_check_latest': 'sequenced_at'},
    )
}}

-- Per Service Broker conversation that an attempt ended (outcome ended_conversation), and
-- per message partition holding such an attempt: when the first of them ran there.
-- poison_messages takes the earliest over the partitions, with the ends `poisonwatch apply`
-- committed (stg_ops__ended_conversations), to answer "has this conversation ended?".

{#-
    Incremental like int_messages_classified: a run rebuilds only the partitions of
    int_receive_attempts_sequenced rewritten since its last run, from their attempts alone. A
    conversation's messages can live in several partitions (each message in the one of its
    first attempt), so it can have a row in each; their earliest is the conversation's end.
    As one row per conversation the table would be rebuilt from every attempt of history on
    each run, since Spark cannot overwrite an unpartitioned Parquet table it reads in the same
    statement. apply's ends are not here:
    they change with the ledger, not with the attempts' partitions.
#}

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
    {{ resequenced_partitions_filter(is_incremental()) }}
),

final as (
    select
        server_name,
        database_name,
        conversation_handle,
        message_partition,
        min(attempted_at) as attempt_ended_at,
        max(sequenced_at) as sequenced_at
    from attempts
    where is_conversation_end
    group by server_name, database_name, conversation_handle, message_partition
)

{# rebalance: each partition written by one task (AQE splits a big one), not a file from
    every task: fewer files to write and read. #}
select /*+ rebalance(message_partition) */
    server_name,
    database_name,
    conversation_handle,
    attempt_ended_at,
    sequenced_at,
    message_partition
from final
