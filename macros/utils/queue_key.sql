{#-
    The key of a queue: Service Broker (broker_kind, server_name, database_name, queue_name),
    JMS (broker_kind, broker_name, queue_name). `columns` replaces the expression of some
    parts, as in message_key.
-#}
{% macro queue_key(broker_kind, columns=none) -%}
    {{ return(adapter.dispatch('queue_key', 'poisonwatch')(broker_kind, columns)) }}
{%- endmacro %}

{% macro default__queue_key(broker_kind, columns) -%}
    {%- set identity = {
        'service_broker': ['broker_kind', 'server_name', 'database_name', 'queue_name'],
        'jms': ['broker_kind', 'broker_name', 'queue_name'],
    } -%}
    {{ return(surrogate_key(identity_columns('queue_key', identity, broker_kind, columns))) }}
{%- endmacro %}
