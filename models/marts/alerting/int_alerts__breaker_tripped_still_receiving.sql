-- breaker_tripped_still_receiving: a JMS consumer whose breaker tripped (by its own
-- failures, rules.md "Circuit breakers") but who still has at least the threshold attempts
-- after the trip: the fuse is not wired in. One alert per consumer, from its first to its
-- last attempt after the trip; resolved once apply disabled the consumer.

{#-
    Attempt by attempt only where it matters: each server's first reporting attempt is looked
    for in the first hour that holds one, and the attempts after a trip are read only from the
    trip's own hour, which is one of those; the hours before and after come from
    int_jms__consumer_hours_summarized, one row per consumer, server and hour, so the model
    does not read every counted attempt of history. The report hours are listed before the
    model runs, so the scan of the attempts is pruned to them by name: Spark prunes
    partitions by a join only when it judges the other side selective, which these
    aggregates are not.
-#}
{%- set partition_seconds = var('attempt_partition_seconds') %}
{%- set report_hours_sql -%}
    {#- A server reports when one of its runs reaches its threshold (breaker_server_reports):
        an hour holds such an attempt when its longest runs do. #}
    select
        consumer_hours.consumer_id,
        consumer_hours.server_name,
        min(consumer_hours.attempt_partition) as attempt_partition
    from {{ ref('int_jms__consumer_hours_summarized') }} as consumer_hours
    inner join {{ ref('consumer_circuit_breakers') }} as breakers
        on consumer_hours.consumer_id = breakers.consumer_id
    where
        breakers.is_self_tripped
        and {{ breaker_server_reports(
            'consumer_hours.longest_same_type_run',
            'consumer_hours.longest_any_type_run',
            'breakers.max_consecutive_failures',
        ) }}
    group by consumer_hours.consumer_id, consumer_hours.server_name
{%- endset %}
{#- None when they cannot be listed (parsing, a unit test's fixtures, or a store where a table
    the listing reads is not built yet): then every hour is read, which gives the same answer. #}
{%- set report_partitions = none %}
{%- set listable = namespace(value=execute) %}
{%- for listed_from in [
    ref('int_jms__consumer_hours_summarized'), ref('consumer_circuit_breakers')
] if listable.value %}
    {%- if listed_from.schema is none or listed_from.identifier is none
        or load_relation(listed_from) is none %}
        {%- set listable.value = false %}
    {%- endif %}
{%- endfor %}
{%- if listable.value %}
    {%- set report_partitions = run_query(
        'select distinct attempt_partition from (' ~ report_hours_sql ~ ') as report_hours'
    ).columns[0].values() | list %}
{%- endif %}

with consumer_circuit_breakers as (
    select * from {{ ref('consumer_circuit_breakers') }}
),

consumer_failure_runs as (
    select * from {{ ref('int_jms__consumer_failure_runs') }}
    {%- if report_partitions %}
        where attempt_partition in ({{ string_literal_list(report_partitions | sort) }})
    {%- elif report_partitions is not none %}
        where false
    {%- endif %}
),

consumer_hours as (
    select * from {{ ref('int_jms__consumer_hours_summarized') }}
),

policies as (
    select * from {{ ref('int_alert_policies') }}
),

breakers as (
    select * from consumer_circuit_breakers
    where is_self_tripped
),

report_hours as (
    {{ report_hours_sql }}
),

server_reports as (
    select
        consumer_failure_runs.consumer_id,
        consumer_failure_runs.server_name,
        min(consumer_failure_runs.attempted_at) as reported_at
    from consumer_failure_runs
    inner join report_hours
        on
            consumer_failure_runs.consumer_id = report_hours.consumer_id
            and consumer_failure_runs.server_name = report_hours.server_name
            and consumer_failure_runs.attempt_partition = report_hours.attempt_partition
    inner join breakers
        on consumer_failure_runs.consumer_id = breakers.consumer_id
    where {{ breaker_server_reports(
        'consumer_failure_runs.same_type_run',
        'consumer_failure_runs.any_type_run',
        'breakers.max_consecutive_failures',
    ) }}
    group by consumer_failure_runs.consumer_id, consumer_failure_runs.server_name
),

trips as (
    select
        server_reports.consumer_id,
        element_at(
            array_sort(collect_list(server_reports.reported_at)),
            {{ breaker_reports_needed('max(breakers.breaker_mode)') }}
        ) as tripped_at
    from server_reports
    inner join breakers
        on server_reports.consumer_id = breakers.consumer_id
    group by server_reports.consumer_id
),

trip_hours as (
    select
        consumer_id,
        tripped_at,
        {{ time_bucket('tripped_at', partition_seconds) }} as attempt_partition
    from trips
    where tripped_at is not null
),

attempts_after_trip as (
    {#- Every attempt of the hours after the trip's (hour labels are 'yyyy-MM-dd HH:mm:ss',
        time_bucket: text order is time order), then those of its own hour after it. #}
    select
        trip_hours.consumer_id,
        trip_hours.tripped_at,
        consumer_hours.attempt_count,
        consumer_hours.first_attempted_at,
        consumer_hours.last_attempted_at
    from trip_hours
    inner join consumer_hours
        on
            trip_hours.consumer_id = consumer_hours.consumer_id
            and trip_hours.attempt_partition < consumer_hours.attempt_partition
    union all
    select
        trip_hours.consumer_id,
        trip_hours.tripped_at,
        1 as attempt_count,
        consumer_failure_runs.attempted_at as first_attempted_at,
        consumer_failure_runs.attempted_at as last_attempted_at
    from trip_hours
    inner join consumer_failure_runs
        on
            trip_hours.consumer_id = consumer_failure_runs.consumer_id
            and trip_hours.attempt_partition = consumer_failure_runs.attempt_partition
            and trip_hours.tripped_at < consumer_failure_runs.attempted_at
),

after_trip as (
    select
        'breaker_tripped_still_receiving' as alert_kind,
        'jms' as broker_kind,
        consumer_id,
        tripped_at,
        sum(attempt_count) as attempts_after_trip,
        min(first_attempted_at) as first_after_at,
        max(last_attempted_at) as last_after_at
    from attempts_after_trip
    group by consumer_id, tripped_at
),

after_trip_with_policies as (
    select
        after_trip.*,
        policies.severity,
        policies.threshold,
        policies.resolved_retention_hours,
        {{ alert_policy_rank('policies', ['after_trip.consumer_id']) }} as policy_rank
    from after_trip
    {{ alert_policy_join(
        'policies', 'after_trip.alert_kind', 'after_trip.broker_kind', none
    ) }}
),

after_trip_with_policy as (
    select *
    from after_trip_with_policies
    where policy_rank = 1
),

alerts as (
    select
        after_trip_with_policy.alert_kind,
        after_trip_with_policy.severity,
        after_trip_with_policy.broker_kind,
        after_trip_with_policy.consumer_id,
        after_trip_with_policy.first_after_at as first_seen_at,
        after_trip_with_policy.last_after_at as last_seen_at,
        after_trip_with_policy.threshold,
        after_trip_with_policy.resolved_retention_hours,
        cast(after_trip_with_policy.attempts_after_trip as double) as observed_value,
        case
            when breakers.is_disabled_by_apply or breakers.is_paused_by_apply then 'resolved'
            else 'open'
        end as status,
        concat(
            'tripped at ', cast(after_trip_with_policy.tripped_at as string), ' (',
            breakers.trip_reason, '); ', after_trip_with_policy.attempts_after_trip,
            ' attempts since'
        ) as detail
    from after_trip_with_policy
    inner join breakers
        on after_trip_with_policy.consumer_id = breakers.consumer_id
    where after_trip_with_policy.attempts_after_trip >= after_trip_with_policy.threshold
),

final as (
    select
        {{ alert_columns([
            'alert_kind', 'severity', 'broker_kind', 'consumer_id', 'first_seen_at',
            'last_seen_at', 'status', 'observed_value', 'threshold', 'detail',
            'resolved_retention_hours',
        ], grain='alert') }}
    from alerts
)

select * from final
