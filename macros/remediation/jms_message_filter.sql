{#- SQL expression: an Artemis message filter selecting one message by its JMSMessageID, the id
    quoted as a filter string literal (quotes doubled). Null when the id is null or empty. -#}
{% macro jms_message_filter(message_id) -%}
    {{ return(adapter.dispatch('jms_message_filter', 'poisonwatch')(message_id)) }}
{%- endmacro %}

{% macro default__jms_message_filter(message_id) -%}
    case
        when {{ message_id }} is not null and length({{ message_id }}) > 0
        then concat('AMQUserID = ', {{ poisonwatch.remediation_text("'") }},
            replace({{ message_id }}, {{ poisonwatch.remediation_text("'") }}, {{ poisonwatch.remediation_text("''") }}),
            {{ poisonwatch.remediation_text("'") }})
    end
{%- endmacro %}
