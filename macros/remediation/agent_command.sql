{#- SQL expression: a command (JSON) for the JMS agent platform (seed 002): `operation` with named
    arguments, e.g. disable_consumer with consumer_id and scheduled_group, or purge_failure_log.
    `arguments` maps argument names to SQL expressions; everything is built by to_json. -#}
{% macro agent_command(operation, arguments={}) -%}
    {% if operation not in ('disable_consumer', 'purge_failure_log') %}
        {{ exceptions.raise_compiler_error("agent_command: unknown operation '" ~ operation ~ "' (disable_consumer, purge_failure_log)") }}
    {% endif %}
    {% if arguments is not mapping %}
        {{ exceptions.raise_compiler_error("agent_command: arguments must be a mapping of name to SQL expression") }}
    {% endif %}
    {% for name in arguments %}
        {% if not modules.re.fullmatch('[a-z_][a-z0-9_]*', name) %}
            {{ exceptions.raise_compiler_error("agent_command: argument name '" ~ name ~ "' must be snake_case") }}
        {% endif %}
    {% endfor %}
    {{ return(adapter.dispatch('agent_command', 'poisonwatch')(operation, arguments)) }}
{%- endmacro %}

{% macro spark__agent_command(operation, arguments) -%}
    to_json(named_struct(
        'type', 'agent-platform',
        'operation', '{{ operation }}'
        {%- for name, expression in arguments.items() %},
        '{{ name }}', {{ expression }}
        {%- endfor %}
    ))
{%- endmacro %}

{% macro default__agent_command(operation, arguments) -%}
    {{ exceptions.raise_compiler_error("agent_command: needs to_json/named_struct (Spark, Databricks); not implemented for " ~ target.type) }}
{%- endmacro %}
