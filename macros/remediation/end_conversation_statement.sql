{#- SQL expression: the T-SQL that ends a Service Broker conversation with an error, then runs the
    policy's clean-up procedure (seed 000's ClearMessageTracking), both in the queue's database
    (tsql_database_context). Values travel as sp_executesql
    parameters (the description through a variable, as its inert literal is an expression);
    the handle must be a GUID and the error code positive, else the result is null. -#}
{% macro end_conversation_statement(database_name, conversation_handle, error_code, error_description, cleanup_procedure=none) -%}
    {% set procedure = cleanup_procedure if cleanup_procedure is not none else var('sb_cleanup_procedure') %}
    {% if procedure is not string %}
        {{ exceptions.raise_compiler_error("end_conversation_statement: cleanup_procedure must be a string (empty for none)") }}
    {% endif %}
    {% if procedure and not modules.re.fullmatch('[A-Za-z_][A-Za-z0-9_@#$]*(\\.[A-Za-z_][A-Za-z0-9_@#$]*){0,2}', procedure) %}
        {{ exceptions.raise_compiler_error("end_conversation_statement: cleanup_procedure '" ~ procedure ~ "' is not a [schema.]procedure name") }}
    {% endif %}
    {{ return(adapter.dispatch('end_conversation_statement', 'poisonwatch')(database_name, conversation_handle, error_code, error_description, procedure)) }}
{%- endmacro %}

{% macro default__end_conversation_statement(database_name, conversation_handle, error_code, error_description, cleanup_procedure) -%}
    {%- set handle = "upper(" ~ conversation_handle ~ ")" -%}
    {%- set code = "cast(coalesce(" ~ error_code ~ ", 500) as int)" -%}
    case
        when {{ poisonwatch.is_guid(conversation_handle) }}
            and {{ code }} > 0
            and {{ poisonwatch.tsql_database_context(database_name) }} is not null
        then concat(
            {{ poisonwatch.tsql_database_context(database_name) }},
            {{ poisonwatch.remediation_text("DECLARE @error_description NVARCHAR(3000) = ") }},
            {{ poisonwatch.tsql_string_literal("coalesce(" ~ error_description ~ ", 'Unable to process message.')", 3000) }},
            {{ poisonwatch.remediation_text(";\nEXEC @sp_executesql\n    N'END CONVERSATION @conversation_handle WITH ERROR = @error_code DESCRIPTION = @error_description;',\n    N'@conversation_handle UNIQUEIDENTIFIER, @error_code INT, @error_description NVARCHAR(3000)',\n    @conversation_handle = ") }},
            {{ poisonwatch.tsql_string_literal(handle) }},
            {{ poisonwatch.remediation_text(",\n    @error_code = ") }}, cast({{ code }} as {{ dbt.type_string() }}),
            {{ poisonwatch.remediation_text(",\n    @error_description = @error_description;") }}
            {%- if cleanup_procedure %},
            {{ poisonwatch.remediation_text("\nEXEC @sp_executesql\n    N'EXEC " ~ ('[' ~ cleanup_procedure.split('.') | join('].[') ~ ']') ~ " @conversationHandle = @conversation_handle;',\n    N'@conversation_handle UNIQUEIDENTIFIER',\n    @conversation_handle = ") }},
            {{ poisonwatch.tsql_string_literal(handle) }}, ';'
            {%- endif %}
        )
    end
{%- endmacro %}
