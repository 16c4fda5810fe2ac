{#-
    How far what apply and the DLQ browses did reaches now, for poison_messages: the newest
    effect time in apply's committed ledgers (dead-lettered, discarded, parked, ended
    conversations) as `effect_at`, and the newest landing batch of the JMS dead-letter queue
    snapshots as `dlq_batch_id`. Remembered for the model's post-hook
    (remember_watermarks, record_remembered_watermarks): the next run takes only what came
    after. Read before the model's statement, so that rows arriving while it runs are taken
    again rather than skipped. Returns them: `{'effect_at': <text or none>, 'dlq_batch_id':
    <text or none>}` (none where nothing is there yet; both none while parsing).
-#}
{% macro remember_effect_reach() -%}
    {{ return(adapter.dispatch('remember_effect_reach', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__remember_effect_reach() -%}
    {%- if not execute -%}
        {{ return({'effect_at': none, 'dlq_batch_id': none}) }}
    {%- endif -%}
    {#- The 'v' keeps agate from reading the text as a date. -#}
    {%- set query -%}
        select
            concat('v', cast(max(effect_at) as string)) as effect_at,
            concat('v', max(dlq_batch_id)) as dlq_batch_id
        from (
            select max(dead_lettered_at) as effect_at, null as dlq_batch_id
            from {{ ref('stg_ops__dead_lettered_messages') }}
            union all
            select max(discarded_at), null from {{ ref('stg_ops__discarded_messages') }}
            union all
            select max(parked_at), null from {{ ref('stg_ops__parked_messages') }}
            union all
            select max(ended_at), null from {{ ref('stg_ops__ended_conversations') }}
            union all
            select null, max(batch_id)
            from {{ ref('stg_jms__queue_snapshots') }}
            where is_dead_letter_queue
        ) as reaches
    {%- endset -%}
    {%- set row = run_query(query).rows[0] -%}
    {%- set reach = {
        'effect_at': none if row[0] is none else row[0][1:],
        'dlq_batch_id': none if row[1] is none else row[1][1:],
    } -%}
    {%- do poisonwatch.remember_watermarks(reach) -%}
    {{ return(reach) }}
{%- endmacro %}
