{#- SQL expression: an Artemis message filter selecting one message by its JMSMessageID, the id
    quoted as a filter string literal (quotes doubled); with `orig_queue`, also by the queue it
    was dead-lettered from (`_AMQ_ORIG_QUEUE`), because the copies a multicast address routed to
    several queues share one JMSMessageID in the DLQ. Null when the id is null or empty. -#}
{% macro jms_message_filter(message_id, orig_queue=none) -%}
    {{ return(adapter.dispatch('jms_message_filter', 'poisonwatch')(message_id, orig_queue)) }}
{%- endmacro %}

{% macro default__jms_message_filter(message_id, orig_queue=none) -%}
    {%- set quote = poisonwatch.remediation_text("'") -%}
    {%- set doubled = poisonwatch.remediation_text("''") -%}
    case
        when {{ message_id }} is not null and length({{ message_id }}) > 0
        then concat('AMQUserID = ', {{ quote }},
            replace({{ message_id }}, {{ quote }}, {{ doubled }}),
            {{ quote }}
            {%- if orig_queue is not none %},
            case
                when {{ orig_queue }} is not null
                then concat(' AND _AMQ_ORIG_QUEUE = ', {{ quote }},
                    replace({{ orig_queue }}, {{ quote }}, {{ doubled }}), {{ quote }})
                else ''
            end
            {%- endif %})
    end
{%- endmacro %}
