-- Per JMS consumer setting with attempts: on how many servers it ran and its first and last
-- attempt, every outcome counted (temporarily_unavailable too, unlike the breaker's runs in
-- int_jms__consumer_failure_runs): consumer_circuit_breakers' list of consumers.

{#-
    A table like the rest of intermediate: as a view, its two key tests and its reader each
    read every JMS attempt again.
#}

with attempts as (
    select
        consumer_id,
        server_name,
        attempted_at
    from {{ ref('int_receive_attempts_sequenced') }}
    where broker_kind = 'jms'
),

final as (
    select
        consumer_id,
        size(collect_set(server_name)) as server_count,
        min(attempted_at) as first_attempted_at,
        max(attempted_at) as last_attempted_at
    from attempts
    group by consumer_id
)

select * from final
