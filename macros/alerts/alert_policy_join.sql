{#-
    The policy rows that may apply to each row of an alert family: of `policies` (the caller's
    import CTE of int_alert_policies, the typed seed alert_policies), the rows of its alert
    kind whose broker_kind and queue_name are the subject's or '*'. Emits the join; the caller
    keeps the row of alert_policy_rank 1 (a row naming the queue wins over '*', then one naming
    the broker kind). `queue_name` none: the subject has no queue (breakers, failure groups),
    only '*' rows match.
-#}
{% macro alert_policy_join(policies, alert_kind, broker_kind, queue_name) -%}
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
    inner join {{ policies }}
        on
            {{ policies }}.alert_kind = {{ alert_kind }}
            and {{ policies }}.broker_kind in ({{ broker_kind }}, '*')
            {%- if queue_name is none %}
            and {{ policies }}.queue_name = '*'
            {%- else %}
            and {{ policies }}.queue_name in ({{ queue_name }}, '*')
            {%- endif %}
{%- endmacro %}
