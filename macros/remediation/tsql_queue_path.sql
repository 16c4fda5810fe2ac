{#- SQL expression: [database].[schema].[queue] for a Service Broker queue. `queue_name` may carry
    its schema (`dbo.ExpenseQueue`); without one the schema is `default_schema`. Null when a part
    is not a valid identifier. -#}
{% macro tsql_queue_path(database_name, queue_name, default_schema='dbo') -%}
    {% if default_schema is not string or default_schema | length == 0 %}
        {{ exceptions.raise_compiler_error("tsql_queue_path: default_schema must be a non-empty string") }}
    {% endif %}
    {{ return(adapter.dispatch('tsql_queue_path', 'poisonwatch')(database_name, queue_name, default_schema)) }}
{%- endmacro %}

{% macro default__tsql_queue_path(database_name, queue_name, default_schema) -%}
    {%- set schema_part = "case when instr(" ~ queue_name ~ ", '.') > 0 then substring(" ~ queue_name ~ ", 1, instr(" ~ queue_name ~ ", '.') - 1) else " ~ poisonwatch.remediation_text(default_schema) ~ " end" -%}
    {%- set name_part = "case when instr(" ~ queue_name ~ ", '.') > 0 then substring(" ~ queue_name ~ ", instr(" ~ queue_name ~ ", '.') + 1) else " ~ queue_name ~ " end" -%}
    concat(
        {{ poisonwatch.tsql_quote_identifier(database_name) }}, '.',
        {{ poisonwatch.tsql_quote_identifier(schema_part) }}, '.',
        {{ poisonwatch.tsql_quote_identifier(name_part) }}
    )
{%- endmacro %}
