-- The poison summary an operator reads after `dbt build` (what `poisonwatch demo` prints):
-- messages by classification and reason, live poison, tripped consumers, disabled queues.
-- `dbt compile --select poison_summary` gives the SQL to run with `poisonwatch sql`.

select
    'message' as kind,
    broker_kind,
    classification as state,
    reason,
    count(*) as item_count,
    count_if(is_live_poison) as live_poison_count
from {{ ref('poison_messages') }}
group by broker_kind, classification, reason

union all

select
    'consumer' as kind,
    'jms' as broker_kind,
    case when is_tripped then 'tripped' else 'ok' end as state,
    trip_reason as reason,
    count(*) as item_count,
    cast(null as bigint) as live_poison_count
from {{ ref('consumer_circuit_breakers') }}
group by is_tripped, trip_reason

union all

select
    'queue' as kind,
    broker_kind,
    case when is_disabled then 'disabled' else 'enabled' end as state,
    disable_risk as reason,
    count(*) as item_count,
    cast(null as bigint) as live_poison_count
from {{ ref('queue_health') }}
where is_latest_snapshot
group by broker_kind, is_disabled, disable_risk
