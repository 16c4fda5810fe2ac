{#- SQL expression: a Jolokia `exec` request (JSON) calling `operation` on an ActiveMQ Artemis queue's
    management bean. Names are quoted as JMX ObjectName values and the whole request is built by
    to_json, so message data only ever appears as JSON strings. `arguments` is a list of SQL
    expressions. Null when a name or an argument is null. -#}
{% macro artemis_command(broker_name, address, queue_name, operation, arguments=[], routing_type='anycast') -%}
    {% if operation is not string or not modules.re.fullmatch('[A-Za-z]+\\([A-Za-z.,]*\\)', operation) %}
        {{ exceptions.raise_compiler_error("artemis_command: operation must be a JMX signature such as 'retryMessages()', got " ~ operation) }}
    {% endif %}
    {% if routing_type not in ('anycast', 'multicast') %}
        {{ exceptions.raise_compiler_error("artemis_command: routing_type must be anycast or multicast, got " ~ routing_type) }}
    {% endif %}
    {% if arguments is string or arguments is not iterable %}
        {{ exceptions.raise_compiler_error("artemis_command: arguments must be a list of SQL expressions") }}
    {% endif %}
    {{ return(adapter.dispatch('artemis_command', 'poisonwatch')(broker_name, address, queue_name, operation, arguments, routing_type)) }}
{%- endmacro %}

{% macro spark__artemis_command(broker_name, address, queue_name, operation, arguments, routing_type) -%}
    {%- set ns = namespace(checks=[broker_name, address, queue_name] + arguments) -%}
    case
        when {% for c in ns.checks %}{{ c }} is not null{% if not loop.last %} and {% endif %}{% endfor %}
        then to_json(named_struct(
            'type', 'exec',
            'mbean', concat(
                'org.apache.activemq.artemis:broker=', {{ poisonwatch._jmx_quote(broker_name) }},
                ',component=addresses,address=', {{ poisonwatch._jmx_quote(address) }},
                ',subcomponent=queues,routing-type=', {{ poisonwatch.remediation_text('"' ~ routing_type ~ '"') }},
                ',queue=', {{ poisonwatch._jmx_quote(queue_name) }}
            ),
            'operation', {{ poisonwatch.remediation_text(operation) }},
            'arguments', array({% for a in arguments %}cast({{ a }} as string){% if not loop.last %}, {% endif %}{% endfor %})
        ))
    end
{%- endmacro %}

{% macro default__artemis_command(broker_name, address, queue_name, operation, arguments, routing_type) -%}
    {{ exceptions.raise_compiler_error("artemis_command: needs to_json/named_struct (Spark, Databricks); not implemented for " ~ target.type) }}
{%- endmacro %}

{#- private: a JMX ObjectName quoted value ("…" with \ " * ? and newline escaped). -#}
{% macro _jmx_quote(expression) -%}
    concat('"', regexp_replace({{ expression }}, {{ poisonwatch.remediation_text('([\\\\"*?])') }}, {{ poisonwatch.remediation_text('\\\\$1') }}), '"')
{%- endmacro %}
