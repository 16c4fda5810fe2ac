{#-
    The classification ladder of rules.md ("Classification", first rule that applies wins),
    as one SQL case expression giving the reason. int_messages_classified evaluates it on a
    message's whole history with the policy in force; int_messages_backtested evaluates it
    after each failure of a message with each candidate policy. One rule, two callers.
    Every argument is a column name or SQL expression (a non-empty string):
    - message: broker_kind, is_last_attempt_success, failure_count, validation_failure_count,
      permanent_failure_count, delivery_count (JMS deliveries), is_disposable_type;
    - policy: failure_threshold, max_delivery_attempts, permanent_error_threshold,
      validation_is_poison.
    poison_classification turns the reason into the classification.
-#}
{% macro poison_reason(
    broker_kind,
    is_last_attempt_success,
    failure_count,
    validation_failure_count,
    permanent_failure_count,
    delivery_count,
    is_disposable_type,
    failure_threshold,
    max_delivery_attempts,
    permanent_error_threshold,
    validation_is_poison
) -%}
    {%- set arguments = {
        'broker_kind': broker_kind,
        'is_last_attempt_success': is_last_attempt_success,
        'failure_count': failure_count,
        'validation_failure_count': validation_failure_count,
        'permanent_failure_count': permanent_failure_count,
        'delivery_count': delivery_count,
        'is_disposable_type': is_disposable_type,
        'failure_threshold': failure_threshold,
        'max_delivery_attempts': max_delivery_attempts,
        'permanent_error_threshold': permanent_error_threshold,
        'validation_is_poison': validation_is_poison,
    } -%}
    {%- for name, value in arguments.items() -%}
        {%- if value is not string or value | trim | length == 0 -%}
            {{ exceptions.raise_compiler_error(
                "poison_reason: argument " ~ name
                ~ " must be a column name or SQL expression, got: " ~ value) }}
        {%- endif -%}
    {%- endfor -%}
    {#- The variants take the checked arguments as one mapping: the list is written once. -#}
    {{ return(adapter.dispatch('poison_reason', 'poisonwatch')(arguments)) }}
{%- endmacro %}

{% macro default__poison_reason(args) -%}
    case
        when {{ args.is_last_attempt_success }} then 'succeeded_after_failures'
        when
            {{ args.validation_failure_count }} > 0
            and coalesce({{ args.validation_is_poison }}, false)
            then 'invalid_content'
        when
            {{ args.permanent_error_threshold }} is not null
            and {{ args.permanent_failure_count }} >= {{ args.permanent_error_threshold }}
            then 'permanent_error'
        when {{ args.is_disposable_type }} then 'disposable'
        when
            {{ args.broker_kind }} = 'service_broker'
            and {{ args.failure_count }} > {{ args.failure_threshold }}
            then 'threshold_exceeded'
        when
            {{ args.broker_kind }} = 'jms'
            and {{ args.delivery_count }} >= {{ args.max_delivery_attempts }}
            then 'max_deliveries'
        when
            {{ args.broker_kind }} = 'service_broker'
            and {{ args.failure_count }} = {{ args.failure_threshold }}
            then 'at_threshold'
        when
            {{ args.broker_kind }} = 'jms'
            and {{ args.delivery_count }} = {{ args.max_delivery_attempts }} - 1
            then 'at_threshold'
        else 'below_threshold'
    end
{%- endmacro %}
