{{
    config(
        materialized='incremental',
        incremental_strategy='insert_overwrite',
        partition_by=['settings_partition'],
        pre_hook="{{ record_batch_watermark('pending') }}",
        post_hook="{{ record_batch_watermark('committed') }}",
    )
}}

-- Per JMS queue, the delivery settings its broker applied at the latest snapshot that shows
-- the queue (jms_address_settings): what int_queue_policies uses where no seed row for the
-- queue overrides it. Policies are per (broker kind, queue): a queue name seen on two brokers
-- gets the settings of the newest snapshot of either.

{#-
    Incremental: a run takes the settings of landing batches it has not taken yet, and
    rewrites only the partitions (a hash of the queue name) those queues fall in, with the
    rows the table held there; so it costs the new snapshots plus a few hundred kept rows,
    not the history of every collect round.
-#}
{%- set partitions = 16 -%}
{%- set settings_columns = [
    'queue_name', 'broker_name', 'address', 'snapshot_at', 'max_delivery_attempts',
    'redelivery_delay_ms', 'redelivery_multiplier', 'max_redelivery_delay_ms',
    'dead_letter_address', 'source_file', 'record_number', 'batch_id', 'settings_partition',
] -%}
{%- set new_settings_sql -%}
    select
        *,
        cast(pmod(xxhash64(queue_name), {{ partitions }}) as int) as settings_partition
    from {{ ref('stg_jms__address_settings') }}
    {% if is_incremental() %}
        where {{ unprocessed_batches_condition(this) }}
    {% endif %}
{%- endset -%}
{%- if is_incremental() -%}
    {%- do batches_taken(this, newest_batch(new_settings_sql)) -%}
{%- endif %}

with new_settings as (
    {{ new_settings_sql }}
),

candidate_settings as (
    select {{ settings_columns | join(', ') }}
    from new_settings
    {% if is_incremental() %}
        union all
        select {{ settings_columns | join(', ') }}
        from {{ this }}
        where settings_partition in (select new_settings.settings_partition from new_settings)
    {% endif %}
),

ranked_settings as (
    select
        *,
        row_number() over (
            partition by queue_name
            order by
                snapshot_at desc,
                broker_name desc,
                batch_id desc,
                source_file desc,
                record_number desc
        ) as settings_rank
    from candidate_settings
),

final as (
    select
        {{ surrogate_key(['queue_name']) }} as queue_settings_key,
        {{ settings_columns | join(', ') }}
    from ranked_settings
    where settings_rank = 1
)

select * from final
