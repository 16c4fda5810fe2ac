-- One row per JMS consumer setting with attempts: the circuit breaker ("fuse") of seed 002
-- as rules.md states it. A server reports when its longest same-type run reaches N or its
-- longest any-type run reaches M; mode ANY trips on one report, MANY on reports from two or
-- more servers; a tripped consumer trips the rest of its scheduled group.

with consumer_hours as (
    select * from {{ ref('int_jms__consumer_hours_summarized') }}
),

consumer_servers as (
    select * from {{ ref('int_jms__consumer_servers_summarized') }}
),

policies as (
    select
        {{ seed_string('consumer_id') }} as consumer_id,
        cast(max_consecutive_failures as int) as max_consecutive_failures,
        upper({{ seed_string('breaker_mode') }}) as breaker_mode,
        {{ seed_string('scheduled_group') }} as scheduled_group,
        lower({{ seed_string('on_trip') }}) as on_trip
    from {{ ref('consumer_policies') }}
),

consumers as (
    {#- The consumer settings with attempts, from their rows per server and partition. #}
    select
        consumer_id,
        cast(count(distinct server_name) as int) as server_count,
        min(first_attempted_at) as first_attempted_at,
        max(last_attempted_at) as last_attempted_at
    from consumer_servers
    group by consumer_id
),

consumer_policies as (
    select
        consumers.*,
        coalesce(
            case
                when own_policy.consumer_id is not null then own_policy.breaker_mode
                else default_policy.breaker_mode
            end,
            upper('{{ var("default_breaker_mode") }}')
        ) as breaker_mode,
        case
            when own_policy.consumer_id is not null then own_policy.max_consecutive_failures
            when default_policy.consumer_id is not null
                then default_policy.max_consecutive_failures
            else {{ var('default_max_consecutive_failures') }}
        end as max_consecutive_failures,
        case
            when own_policy.consumer_id is not null then own_policy.scheduled_group
            else default_policy.scheduled_group
        end as scheduled_group,
        coalesce(own_policy.on_trip, default_policy.on_trip, 'disable_consumer') as on_trip
    from consumers
    left join policies as own_policy
        on consumers.consumer_id = own_policy.consumer_id
    left join policies as default_policy
        on default_policy.consumer_id = '*'
),

{#
    Two exception classes can reach the same longest same-type run on a server (or on two
    servers): the class shown is the one whose run reached that length last, in attempt order
    (then by server name). max_by over the run length alone would pick one of them by the order
    Spark happens to read the rows in, which differs between a full refresh and an incremental
    run. Each hour keeps the attempt where its longest same-type run ended, greatest by the
    same order (int_jms__consumer_hours_summarized): the greatest of the hours' is the
    greatest of all the server's attempts.
#}
server_runs as (
    select
        consumer_id,
        server_name,
        max(longest_same_type_run) as longest_same_type_run,
        max(longest_any_type_run) as longest_any_type_run,
        max_by(
            struct(
                same_type_exception_class as exception_class,
                same_type_run_end_at as attempted_at
            ),
            struct(
                longest_same_type_run,
                same_type_run_end_at,
                same_type_run_end_source_file,
                same_type_run_end_record_number,
                same_type_run_end_attempt_key
            )
        ) as longest_same_type_run_end
    from consumer_hours
    group by consumer_id, server_name
),

server_reports as (
    select
        server_runs.*,
        consumer_policies.max_consecutive_failures,
        {{ breaker_same_type_threshold('consumer_policies.max_consecutive_failures') }}
            as same_type_threshold,
        server_runs.longest_same_type_run
        >= {{ breaker_same_type_threshold('consumer_policies.max_consecutive_failures') }}
            as is_same_type_report,
        {{ breaker_server_reports(
            'server_runs.longest_same_type_run',
            'server_runs.longest_any_type_run',
            'consumer_policies.max_consecutive_failures',
        ) }} as is_report
    from server_runs
    inner join consumer_policies
        on server_runs.consumer_id = consumer_policies.consumer_id
),

per_consumer as (
    select
        server_reports.consumer_id,
        max(server_reports.longest_same_type_run) as longest_same_type_run,
        max(server_reports.longest_any_type_run) as longest_any_type_run,
        max_by(
            server_reports.longest_same_type_run_end.exception_class,
            struct(
                server_reports.longest_same_type_run,
                server_reports.longest_same_type_run_end.attempted_at,
                server_reports.server_name
            )
        ) as same_type_exception_class,
        count_if(server_reports.is_report) as reporting_server_count,
        count_if(server_reports.is_same_type_report) as same_type_reporting_server_count,
        array_join(array_sort(collect_set(
            case when server_reports.is_report then server_reports.server_name end
        )), ',') as reporting_servers
    from server_reports
    group by server_reports.consumer_id
),

self_tripped as (
    select
        consumer_policies.*,
        {{ breaker_same_type_threshold('consumer_policies.max_consecutive_failures') }}
            as same_type_threshold,
        coalesce(per_consumer.longest_same_type_run, 0) as longest_same_type_run,
        coalesce(per_consumer.longest_any_type_run, 0) as longest_any_type_run,
        case
            when per_consumer.longest_same_type_run > 0 then per_consumer.same_type_exception_class
        end as same_type_exception_class,
        coalesce(per_consumer.reporting_server_count, 0) as reporting_server_count,
        coalesce(per_consumer.same_type_reporting_server_count, 0)
            as same_type_reporting_server_count,
        nullif(per_consumer.reporting_servers, '') as reporting_servers,
        coalesce(per_consumer.reporting_server_count, 0)
        >= {{ breaker_reports_needed('consumer_policies.breaker_mode') }}
            as is_self_tripped
    from consumer_policies
    left join per_consumer
        on consumer_policies.consumer_id = per_consumer.consumer_id
),

grouped as (
    select
        self_tripped.*,
        case
            when self_tripped.scheduled_group is not null
                then
                    count_if(self_tripped.is_self_tripped)
                        over (partition by self_tripped.scheduled_group)
            else 0
        end as group_tripped_count
    from self_tripped
),

disabled_by_apply as (
    select distinct consumer_id
    from {{ ref('stg_ops__disabled_consumers') }}
    where consumer_id is not null
),

disabled_groups_by_apply as (
    select distinct scheduled_group
    from {{ ref('stg_ops__disabled_consumers') }}
    where scheduled_group is not null
),

paused_by_apply as (
    -- Consumers whose queue apply paused (pause_queue) and no resume has turned back on.
    select distinct paused_queues.consumer_id
    from {{ ref('stg_ops__paused_queues') }} as paused_queues
    left anti join {{ ref('stg_ops__resume_requests') }} as resume_requests
        on paused_queues.action_id = resume_requests.paused_action_id
    where paused_queues.consumer_id is not null
)

select
    grouped.consumer_id,
    grouped.breaker_mode,
    grouped.max_consecutive_failures,
    grouped.same_type_threshold,
    grouped.scheduled_group,
    grouped.on_trip,
    grouped.longest_same_type_run,
    grouped.longest_any_type_run,
    grouped.same_type_exception_class,
    grouped.reporting_server_count,
    grouped.reporting_servers,
    grouped.server_count,
    grouped.is_self_tripped,
    grouped.first_attempted_at,
    grouped.last_attempted_at,
    grouped.is_self_tripped or grouped.group_tripped_count > 0 as is_tripped,
    case
        when grouped.is_self_tripped and grouped.same_type_reporting_server_count > 0
            then 'same_exception_type'
        when grouped.is_self_tripped then 'any_exception_types'
        when grouped.group_tripped_count > 0 then 'scheduled_group'
    end as trip_reason,
    disabled_by_apply.consumer_id is not null
    or disabled_groups_by_apply.scheduled_group is not null as is_disabled_by_apply,
    paused_by_apply.consumer_id is not null as is_paused_by_apply
from grouped
left join disabled_by_apply
    on grouped.consumer_id = disabled_by_apply.consumer_id
left join disabled_groups_by_apply
    on grouped.scheduled_group = disabled_groups_by_apply.scheduled_group
left join paused_by_apply
    on grouped.consumer_id = paused_by_apply.consumer_id
