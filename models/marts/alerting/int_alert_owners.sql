-- The owners of seed alert_owners, typed: who is told about an incident, per broker kind,
-- queue and consumer ('*' for any). The most specific row wins (mart alert_incidents): one
-- naming the consumer, then the queue, then the broker kind.

with alert_owners as (
    select * from {{ ref('alert_owners') }}
),

final as (
    select
        lower(coalesce({{ seed_string('broker_kind') }}, '*')) as broker_kind,
        coalesce({{ seed_string('queue_name') }}, '*') as queue_name,
        coalesce({{ seed_string('consumer_id') }}, '*') as consumer_id,
        {{ seed_string('owner_team') }} as owner_team,
        {{ seed_string('owner_channel') }} as owner_channel
    from alert_owners
)

select * from final
