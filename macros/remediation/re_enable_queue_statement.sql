{#- SQL expression: the T-SQL that turns a Service Broker queue back on (seed 001: after the
    poison message's conversation has been ended), the ALTER QUEUE held in a variable (its
    inert literal is an expression). Null when the names are not valid identifiers. -#}
{% macro re_enable_queue_statement(database_name, queue_name) -%}
    {{ return(adapter.dispatch('re_enable_queue_statement', 'poisonwatch')(database_name, queue_name)) }}
{%- endmacro %}

{% macro default__re_enable_queue_statement(database_name, queue_name) -%}
    {%- set path = poisonwatch.tsql_queue_path(database_name, queue_name) -%}
    case
        when {{ path }} is not null
        then concat(
            {{ poisonwatch.tsql_database_context(database_name) }},
            'DECLARE @statement NVARCHAR(MAX) = ',
            {{ poisonwatch.tsql_string_literal("concat('ALTER QUEUE ', " ~ path ~ ", ' WITH STATUS = ON;')") }},
            {{ poisonwatch.remediation_text(";\nEXEC @sp_executesql @statement;") }}
        )
    end
{%- endmacro %}
