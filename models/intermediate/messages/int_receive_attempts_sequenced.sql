{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['message_partition'],
        on_schema_change='append_new_columns',
        tblproperties=(
            {'delta.dataSkippingStatsColumns': 'sequenced_at,attempted_at,batch_id'}
            if var('file_format') == 'delta' else {}
        ),
        meta={
            'tests_check_latest': 'sequenced_at',
        },
        pre_hook=[
            "{{ record_batch_watermark('pending') }}",
        ],
        post_hook=[
            "{{ record_batch_watermark('committed') }}",
        ],
    )
}}

-- Every receive attempt of both broker kinds in one vocabulary, with its failure class and
-- its place in the sequence of attempts of its message (rules.md, "Message identity").

{#- Delta keeps file statistics of the first 32 columns only (tblproperties above):
    `sequenced_at`, which the readers filter by (changed_since_bound), is not among them. #}

{#-
    Incremental (Parquet, partition overwrite, no MERGE). All attempts of a message live in
    one partition, `message_partition`: the hour (var message_partition_seconds) of its first
    attempt when first seen, kept ever after ("sticky"), so a late attempt never splits a
    message. A run reads only the landing batches not yet processed and rewrites the
    partitions of the messages they touch, old attempts and new sequenced again: a late
    attempt lands among its message's attempts and every window below sees it. The partition
    layout may differ from a full refresh's; the attempts, their sequence and marts do not.
    A message still open when first seen (no committed or acknowledged receive, no
    conversation end yet) goes to its hour's open partition ('<hour> open'), and a message
    first seen by an incremental run to a partition of the run's hour ('<hour>[ open]
    r<run hour>'): the messages later landings touch are mostly those still being retried,
    so a run rewrites them and not every message of their hour that was done long ago, and
    adding new messages to an hour (the newest one, or an old one in a late file) rewrites
    nothing an earlier hour's run wrote.
-#}
{%- set attempt_columns = [
    'attempt_key',
    'message_key',
    'queue_key',
    'broker_kind',
    'server_name',
    'database_name',
    'broker_name',
    'address',
    'queue_name',
    'conversation_group_id',
    'conversation_handle',
    'message_sequence_number',
    'message_id',
    'orig_address',
    'orig_queue',
    'group_id',
    'message_type_name',
    'consumer_id',
    'activation_id',
    'reader',
    'attempted_at',
    'attempt_id',
    'source_file',
    'record_number',
    'batch_id',
    'outcome',
    'is_failure',
    'is_success',
    'is_whole_transaction_rollback',
    'is_conversation_end',
    'is_temporarily_unavailable',
    'error_key',
    'error_message',
    'delivery_count',
    'is_redelivered',
] -%}
{%- set partition_seconds = var('message_partition_seconds') -%}
{%- set new_batches_only = is_incremental() -%}
{#- An incremental run puts new messages in partitions of its own hour (new_message_partition):
    the start of the time bucket holding the run's start, so runs in the same hour share them. -#}
{%- set run_epoch = run_started_at.timestamp() | int -%}
{%- set generation = modules.datetime.datetime.fromtimestamp(
    run_epoch - run_epoch % (partition_seconds | int), modules.pytz.utc
).strftime('%Y%m%dT%H%M%S') if new_batches_only else none -%}
{%- set partitions = [] -%}
{%- set batch_filter = '' -%}
{%- if new_batches_only -%}
    {%- set landed_filter = 'where ' ~ unprocessed_batches_condition(this) -%}
    {#-
        The partitions to rewrite, read before the model runs so that the scan of this table
        is pruned to them: where the touched messages already live, and, for messages never
        seen, the hour of their first new attempt. With them, the newest batch landed: the
        run takes no batch newer than that (one landing while it runs is the next run's), and
        its hooks record it (record_batch_watermark).
    -#}
    {%- set partitions_query -%}
        with new_messages as (
            select
                message_key,
                min(attempted_at) as first_new_attempted_at,
                max(is_settling) as is_settled,
                max(batch_id) as newest_batch_id
            from (
                select
                    message_key,
                    attempted_at,
                    is_success or is_conversation_end as is_settling,
                    batch_id
                from {{ ref('stg_service_broker__receive_attempts') }}
                union all
                select message_key, attempted_at, is_success as is_settling, batch_id
                from {{ ref('stg_jms__receive_attempts') }}
            ) as landed
            {{ landed_filter }}
            group by message_key
        ),

        known_messages as (
            select distinct
                message_key,
                message_partition
            from {{ this }}
            where message_key in (select new_messages.message_key from new_messages)
        )

        select
            coalesce(
                known_messages.message_partition,
                {{ new_message_partition(
                    'new_messages.first_new_attempted_at',
                    'new_messages.is_settled',
                    partition_seconds,
                    generation,
                ) }}
            ) as message_partition,
            max(new_messages.newest_batch_id) as newest_batch_id
        from new_messages
        left join known_messages
            on new_messages.message_key = known_messages.message_key
        group by 1
    {%- endset -%}
    {%- set batch_filter = landed_filter -%}
    {%- if execute -%}
        {%- set landed = run_query(partitions_query) -%}
        {%- set partitions = landed.columns[0].values() | list -%}
        {%- set landed_batches = landed.columns[1].values() | reject('none') | list -%}
        {%- if landed_batches -%}
            {%- set newest_landed = landed_batches | max -%}
            {%- set batch_filter = batch_filter ~ ' and batch_id <= '
                ~ string_literal_list([newest_landed]) -%}
            {%- do batches_taken(this, newest_landed) -%}
        {%- endif -%}
    {%- endif -%}
{%- endif %}

with service_broker_attempts as (
    select
        attempt_key,
        message_key,
        queue_key,
        broker_kind,
        server_name,
        database_name,
        cast(null as string) as broker_name,
        cast(null as string) as address,
        queue_name,
        conversation_group_id,
        conversation_handle,
        message_sequence_number,
        cast(null as string) as message_id,
        cast(null as string) as orig_address,
        cast(null as string) as orig_queue,
        cast(null as string) as group_id,
        message_type_name,
        cast(null as string) as consumer_id,
        cast(null as string) as activation_id,
        reader,
        attempted_at,
        attempt_id,
        source_file,
        record_number,
        batch_id,
        outcome,
        is_failure,
        is_success,
        is_whole_transaction_rollback,
        is_conversation_end,
        false as is_temporarily_unavailable,
        error_key,
        error_message,
        cast(null as int) as delivery_count,
        cast(null as boolean) as is_redelivered
    from {{ ref('stg_service_broker__receive_attempts') }}
    {{ batch_filter }}
),

jms_attempts as (
    select
        attempt_key,
        message_key,
        queue_key,
        broker_kind,
        server_name,
        cast(null as string) as database_name,
        broker_name,
        address,
        queue_name,
        cast(null as string) as conversation_group_id,
        cast(null as string) as conversation_handle,
        cast(null as bigint) as message_sequence_number,
        message_id,
        orig_address,
        orig_queue,
        group_id,
        message_type_name,
        consumer_id,
        activation_id,
        cast(null as string) as reader,
        attempted_at,
        cast(null as string) as attempt_id,
        source_file,
        record_number,
        batch_id,
        outcome,
        is_failure,
        is_success,
        false as is_whole_transaction_rollback,
        false as is_conversation_end,
        is_temporarily_unavailable,
        error_key,
        error_message,
        delivery_count,
        is_redelivered
    from {{ ref('stg_jms__receive_attempts') }}
    {{ batch_filter }}
),

attempts as (
    select * from service_broker_attempts
    union all
    select * from jms_attempts
),

error_classes as (
    select
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('error_key') }} as error_key,
        lower({{ seed_string('failure_class') }}) as failure_class
    from {{ ref('error_classes') }}
),

classified as (
    select
        attempts.*,
        cast(null as string) as previous_message_partition,
        case
            when not attempts.is_failure then null
            when attempts.is_temporarily_unavailable then 'transient'
            else coalesce(error_classes.failure_class, 'unknown')
        end as failure_class
    from attempts
    left join error_classes
        on
            attempts.broker_kind = error_classes.broker_kind
            and attempts.error_key = error_classes.error_key
),
{%- if new_batches_only %}

    previous_attempts as (
        select
            {{ attempt_columns | join(',\n            ') }},
            message_partition as previous_message_partition,
            failure_class
        from {{ this }}
        {%- if partitions | length > 0 %}
            where message_partition in ({{ string_literal_list(partitions) }})
        {%- else %}
            where false
        {%- endif %}
    ),
{%- endif %}

all_attempts as (
    select * from classified
    {%- if new_batches_only %}
        union all
        select * from previous_attempts
    {%- endif %}
),

{#
    One window specification (message, then the attempt order) for every window, so Spark
    sorts the attempts once; consecutive failures are the failures since the last success.
-#}
sequenced as (
    select
        all_attempts.*,
        row_number() over message_attempts as attempt_number,
        sum(case when all_attempts.is_success then 1 else 0 end) over message_attempts_so_far
            as success_island,
        sum(case when all_attempts.is_failure then 1 else 0 end) over message_attempts_so_far
            as failures_so_far,
        size(
            collect_set(case when all_attempts.is_failure then all_attempts.error_key end)
                over message_attempts_so_far
        ) as distinct_errors_so_far,
        count(*) over message_all as attempt_count,
        sum(case when all_attempts.is_failure then 1 else 0 end) over message_all
            as failure_count,
        lead(all_attempts.attempted_at) over message_attempts as next_attempted_at,
        coalesce(
            max(all_attempts.previous_message_partition) over message_all,
            {{ new_message_partition(
                'min(all_attempts.attempted_at) over message_all',
                'max(all_attempts.is_success or all_attempts.is_conversation_end)'
                ~ ' over message_all',
                partition_seconds,
                generation,
            ) }}
        ) as message_partition
    from all_attempts
    window
        message_all as (partition by all_attempts.message_key),
        message_attempts as (
            partition by all_attempts.message_key
            order by
                {{ attempt_order('all_attempts', 16) }}
        ),
        message_attempts_so_far as (
            partition by all_attempts.message_key
            order by
                {{ attempt_order('all_attempts', 16) }}
            rows between unbounded preceding and current row
        )
),

final as (
    select
        sequenced.* except (
            previous_message_partition,
            attempt_count,
            failure_count,
            next_attempted_at,
            message_partition
        ),
        sequenced.failures_so_far - coalesce(
            max(case when sequenced.is_success then sequenced.failures_so_far end) over (
                partition by sequenced.message_key
                order by
                    {{ attempt_order('sequenced', 20) }}
                rows between unbounded preceding and current row
            ),
            0
        ) as consecutive_failures,
        sequenced.attempt_number = sequenced.attempt_count as is_latest_attempt,
        timestamp '{{ run_started_at.strftime("%Y-%m-%d %H:%M:%S") }}' as sequenced_at,
        {#- Last before the partition column, so that a table that gained them
            (on_schema_change) and a new one agree on the order. #}
        sequenced.next_attempted_at,
        sequenced.is_failure and sequenced.failures_so_far = sequenced.failure_count
            as is_latest_failure,
        sequenced.message_partition
    from sequenced
)

select * from final
