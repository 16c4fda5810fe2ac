{#-
    The policy of each row of an alert family: of `policies` (the caller's import CTE of
    int_alert_policies, the typed seed alert_policies), the rows of its alert kind whose
    broker_kind and queue_name are the subject's or '*'; a row naming the queue wins over '*',
    then one naming the broker kind. Emits the join and the `qualify` keeping one policy per
    `partition_by` (the subject, and the point in time for point families): it ends the
    caller's `from` clause (no `where` after it). `queue_name` none: the subject has no queue
    (breakers, failure groups), only '*' rows match.
-#}
{% macro alert_policy_join(policies, alert_kind, broker_kind, queue_name, partition_by) -%}
    {%- for value in [policies, alert_kind, broker_kind] -%}
        {%- if value is not string or value | trim | length == 0 -%}
            {{ exceptions.raise_compiler_error(
                "alert_policy_join: policies, alert_kind and broker_kind are SQL expressions, got: "
                ~ value) }}
        {%- endif -%}
    {%- endfor -%}
    {%- if queue_name is not none and (queue_name is not string or queue_name | trim | length == 0) -%}
        {{ exceptions.raise_compiler_error(
            "alert_policy_join: queue_name is a SQL expression or none, got: " ~ queue_name) }}
    {%- endif -%}
    {%- if partition_by is string or partition_by is mapping or partition_by | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "alert_policy_join: partition_by must be a non-empty list of expressions") }}
    {%- endif -%}
    {{ return(adapter.dispatch('alert_policy_join', 'poisonwatch')(
        policies, alert_kind, broker_kind, queue_name, partition_by)) }}
{%- endmacro %}

{% macro default__alert_policy_join(policies, alert_kind, broker_kind, queue_name, partition_by) -%}
    inner join {{ policies }}
        on
            {{ policies }}.alert_kind = {{ alert_kind }}
            and {{ policies }}.broker_kind in ({{ broker_kind }}, '*')
            {%- if queue_name is none %}
            and {{ policies }}.queue_name = '*'
            {%- else %}
            and {{ policies }}.queue_name in ({{ queue_name }}, '*')
            {%- endif %}
    qualify row_number() over (
        partition by {{ partition_by | join(', ') }}
        order by
            case when {{ policies }}.queue_name = '*' then 1 else 0 end,
            case when {{ policies }}.broker_kind = '*' then 1 else 0 end
    ) = 1
{%- endmacro %}
