{#-
    The last two columns of every per-message ledger staging model (discarded, parked,
    dead-lettered): the conversation handle as the attempt logs spell it, and the message_key
    the marts join on. One definition, so the three ledgers key a message exactly as
    stg_service_broker__receive_attempts and stg_jms__receive_attempts do.
    `jms_queue_name`: the SQL expression of the JMS queue that keys the message (a message
    dead-lettered by apply is keyed on its original queue: 'coalesce(orig_queue, queue_name)').
-#}
{% macro ledger_message_key(jms_queue_name='queue_name') -%}
    {%- if jms_queue_name is not string or jms_queue_name | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "ledger_message_key expects a SQL expression for jms_queue_name, got: "
            ~ jms_queue_name) }}
    {%- endif -%}
    {{ return(adapter.dispatch('ledger_message_key', 'poisonwatch')(jms_queue_name)) }}
{%- endmacro %}

{% macro default__ledger_message_key(jms_queue_name) -%}
    upper(trim(conversation_handle)) as conversation_handle,
    case
        when broker_kind = 'jms'
            then {{ message_key('jms', {'queue_name': jms_queue_name}) }}
        else
            {{ message_key(
                'service_broker',
                {
                    'conversation_handle': 'upper(trim(conversation_handle))',
                    'message_sequence_number': 'cast(message_sequence_number as bigint)',
                }
            ) }}
    end as message_key
{%- endmacro %}
