{#- A question about all of history, asked on demand (`poisonwatch backtest` builds it): tagged
    so that the production build after each ingest leaves it out (selectors.yml). -#}
{{ config(tags=['on_demand']) }}

-- One row per error signature (error number or exception class and normalised message, the
-- grain and key of failure_groups): how often a failure with it was followed by a success of
-- the same message, the attempts and the time that took, and what that evidence says against
-- the class seeds/error_classes.csv gives the error. A permanent error that later succeeds
-- (success share >= error_evidence_transient_share) or a transient one that never does, each
-- seen on at least error_evidence_min_messages messages, is recommended for reclassification;
-- so is an error the seed does not list, once its evidence is clear either way.

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
),

error_classes as (
    select
        lower({{ seed_string('broker_kind') }}) as broker_kind,
        {{ seed_string('error_key') }} as error_key,
        lower({{ seed_string('failure_class') }}) as failure_class
    from {{ ref('error_classes') }}
),

attempts_with_next_success as (
    select
        message_key,
        broker_kind,
        error_key,
        error_message,
        attempt_key,
        attempted_at,
        attempt_number,
        is_failure,
        min(case when is_success then attempt_number end) over later_attempts
            as next_success_attempt_number,
        min(case when is_success then attempted_at end) over later_attempts
            as next_success_at
    from attempts
    window later_attempts as (
        partition by message_key
        order by attempt_number
        rows between current row and unbounded following
    )
),

failures as (
    select
        broker_kind,
        coalesce(error_key, '') as error_key,
        {{ normalize_error_message('coalesce(error_message, \'\')') }} as normalized_message,
        error_message,
        message_key,
        attempt_key,
        attempted_at,
        next_success_attempt_number is not null as is_followed_by_success,
        next_success_attempt_number - attempt_number as attempts_to_success,
        cast(unix_micros(next_success_at) - unix_micros(attempted_at) as double) / 1000000
            as seconds_to_success
    from attempts_with_next_success
    where is_failure
),

signatures as (
    select
        broker_kind,
        error_key,
        normalized_message,
        min(struct(attempted_at, attempt_key, error_message)).error_message
            as example_error_message,
        count(*) as failure_count,
        count(distinct message_key) as message_count,
        count_if(is_followed_by_success) as failures_followed_by_success,
        count(distinct case when is_followed_by_success then message_key end)
            as recovered_message_count,
        avg(case when is_followed_by_success then attempts_to_success end)
            as attempts_to_success_mean,
        percentile_approx(
            case when is_followed_by_success then seconds_to_success end, 0.5
        ) as seconds_to_success_median
    from failures
    group by broker_kind, error_key, normalized_message
),

judged as (
    select
        signatures.*,
        coalesce(error_classes.failure_class, 'unknown') as seed_failure_class,
        signatures.failures_followed_by_success / signatures.failure_count as success_share,
        case
            when signatures.message_count < {{ var('error_evidence_min_messages') }} then null
            when
                signatures.failures_followed_by_success
                >= {{ var('error_evidence_transient_share') }} * signatures.failure_count
                then 'transient'
            when signatures.failures_followed_by_success = 0 then 'permanent'
        end as evidence_class
    from signatures
    left join error_classes
        on
            signatures.broker_kind = error_classes.broker_kind
            and signatures.error_key = error_classes.error_key
),

recommended as (
    select
        judged.*,
        coalesce(
            (judged.evidence_class = 'transient' and judged.seed_failure_class != 'transient')
            or (
                judged.evidence_class = 'permanent'
                and judged.seed_failure_class not in ('permanent', 'validation')
            ),
            false
        ) as is_reclassification_recommended
    from judged
),

final as (
    select
        {{ surrogate_key(['broker_kind', 'error_key', 'normalized_message']) }}
            as failure_group_id,
        broker_kind,
        error_key,
        normalized_message,
        example_error_message,
        seed_failure_class,
        failure_count,
        message_count,
        failures_followed_by_success,
        recovered_message_count,
        success_share,
        attempts_to_success_mean,
        seconds_to_success_median,
        evidence_class,
        is_reclassification_recommended,
        case when is_reclassification_recommended then evidence_class end as recommended_class,
        {#- Permanent: each message would be declared at its first such failure; the failures
            after it (none followed by a success) are the retries saved. #}
        case
            when is_reclassification_recommended and evidence_class = 'permanent'
                then failure_count - message_count
            else 0
        end as attempts_saved,
        {#- Transient: the messages that recovered, which a permanent class declares poison. #}
        case
            when is_reclassification_recommended and evidence_class = 'transient'
                then recovered_message_count
            else 0
        end as false_poison_avoided
    from recommended
)

select * from final
