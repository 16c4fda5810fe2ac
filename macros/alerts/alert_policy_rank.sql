{#-
    Which of the policy rows joined by alert_policy_join applies: 1 for the row naming the
    queue over '*', then the one naming the broker kind, per `partition_by` (one row of the
    alert family). The caller keeps rank 1 in the next CTE (Spark 4.1 has no `qualify`).
-#}
{% macro alert_policy_rank(policies, partition_by) -%}
    {%- if policies is not string or policies | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "alert_policy_rank: policies is the name of the policies CTE, got: " ~ policies) }}
    {%- endif -%}
    {%- if partition_by is string or partition_by is mapping or partition_by | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "alert_policy_rank: partition_by must be a non-empty list of expressions") }}
    {%- endif -%}
    row_number() over (
        partition by {{ partition_by | join(', ') }}
        order by
            case when {{ policies }}.queue_name = '*' then 1 else 0 end,
            case when {{ policies }}.broker_kind = '*' then 1 else 0 end
    )
{%- endmacro %}
