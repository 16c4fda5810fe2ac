{#- A question about all of history, asked on demand (`poisonwatch backtest` builds it): tagged
    so that the production build after each ingest leaves it out (selectors.yml). -#}
{{ config(tags=['on_demand']) }}

-- One row per error signature (error number or exception class and normalised message, the grain
-- and key of failure_groups): how often a failure with it was followed by a success of the same
-- message, the attempts and the time that took, and what that evidence says against the class
-- seeds/error_classes.csv gives the error (as the live rules apply it: the worst class among the
-- signature's failures, a JMS temporarily-unavailable outcome always transient). A permanent error
-- that later succeeds (success share >= error_evidence_transient_share) or a transient one that
-- never does, each seen on at least error_evidence_min_messages messages, is recommended for
-- reclassification; so is an error the seed does not list, once its evidence is clear either way.
-- The seed keys on the error alone, so a recommendation needs every judged signature of the error
-- to agree. A message still being retried counts as not (yet) followed by a success.

with attempts as (
    select * from {{ ref('int_receive_attempts_sequenced') }}
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
        failure_class,
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
        failure_class,
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
        max({{ failure_class_rank('failure_class') }}) as failure_class_rank,
        count(*) as failure_count,
        count(distinct message_key) as message_count,
        count_if(is_followed_by_success) as failures_followed_by_success,
        count(distinct case when is_followed_by_success then message_key end)
            as recovered_message_count,
        avg(case when is_followed_by_success then attempts_to_success end)
            as attempts_to_success_mean,
        percentile(
            case when is_followed_by_success then seconds_to_success end, 0.5
        ) as seconds_to_success_median
    from failures
    group by broker_kind, error_key, normalized_message
),

judged as (
    select
        signatures.*,
        {{ failure_class_from_rank('signatures.failure_class_rank') }} as seed_failure_class,
        signatures.failures_followed_by_success / signatures.failure_count as success_share,
        case
            {#- Without an error key no seed row can match: nothing to recommend. #}
            when signatures.error_key = '' then null
            when signatures.message_count < {{ var('error_evidence_min_messages') }} then null
            when
                signatures.failures_followed_by_success
                >= {{ var('error_evidence_transient_share') }} * signatures.failure_count
                then 'transient'
            when signatures.failures_followed_by_success = 0 then 'permanent'
        end as evidence_class,
        signatures.error_key != ''
        and signatures.message_count >= {{ var('error_evidence_min_messages') }}
            as is_judged
    from signatures
),

error_agreement as (
    select
        judged.*,
        {#- The error's judged signatures: all of one evidence class, none in between. #}
        count_if(judged.is_judged and judged.evidence_class is null) over error_signatures
            as in_between_signatures,
        size(collect_set(judged.evidence_class) over error_signatures) as evidence_classes
    from judged
    window error_signatures as (partition by judged.broker_kind, judged.error_key)
),

recommended as (
    select
        error_agreement.*,
        coalesce(
            error_agreement.in_between_signatures = 0
            and error_agreement.evidence_classes = 1
            and (
                (
                    error_agreement.evidence_class = 'transient'
                    and error_agreement.seed_failure_class != 'transient'
                )
                or (
                    error_agreement.evidence_class = 'permanent'
                    and error_agreement.seed_failure_class not in ('permanent', 'validation')
                )
            ),
            false
        ) as is_reclassification_recommended
    from error_agreement
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
        {#- Permanent: at most the failures after each message's first one with it (none
            followed by a success), which a queue declaring poison at the first permanent
            failure (permanent_error_threshold 1) would have spared. #}
        case
            when is_reclassification_recommended and evidence_class = 'permanent'
                then failure_count - message_count
            else 0
        end as attempts_saved,
        {#- Transient: the messages that recovered, which a permanent or validation class
            can declare poison (where the queue's policy acts on that class). #}
        case
            when
                is_reclassification_recommended
                and evidence_class = 'transient'
                and seed_failure_class in ('permanent', 'validation')
                then recovered_message_count
            else 0
        end as false_poison_avoided
    from recommended
)

select * from final
