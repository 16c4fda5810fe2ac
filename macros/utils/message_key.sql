{#-
    The key of a message, from its identity in docs/rules.md ("Message identity"):
    Service Broker (broker_kind, server_name, database_name, queue_name, conversation_handle,
    message_sequence_number); JMS (broker_kind, broker_name, queue_name, message_id).
    `columns` replaces the expression of some parts (e.g. {'queue_name':
    'coalesce(orig_queue, queue_name)'} for a dead-lettered JMS message), so every model keys a
    message the same way and joins on it agree.
-#}
{% macro message_key(broker_kind, columns=none) -%}
    {{ return(adapter.dispatch('message_key', 'poisonwatch')(broker_kind, columns)) }}
{%- endmacro %}

{% macro default__message_key(broker_kind, columns) -%}
    {%- set identity = {
        'service_broker': [
            'broker_kind',
            'server_name',
            'database_name',
            'queue_name',
            'conversation_handle',
            'message_sequence_number',
        ],
        'jms': ['broker_kind', 'broker_name', 'queue_name', 'message_id'],
    } -%}
    {{ return(surrogate_key(identity_columns('message_key', identity, broker_kind, columns))) }}
{%- endmacro %}
