{#- SQL expression: seed 001's review script for one conversation's message: receive it inside a
    transaction, print the body by `validation`, roll back (the batch held in a variable: its
    inert literal is an expression). For a person to run; never applied.
    Null when the handle is not a GUID or the queue name is not a valid identifier. -#}
{% macro inspect_message_statement(database_name, queue_name, conversation_handle, timeout_ms=2000) -%}
    {% if timeout_ms is not number or timeout_ms < 0 %}
        {{ exceptions.raise_compiler_error("inspect_message_statement: timeout_ms must be a non-negative integer, got " ~ timeout_ms) }}
    {% endif %}
    {{ return(adapter.dispatch('inspect_message_statement', 'poisonwatch')(database_name, queue_name, conversation_handle, timeout_ms)) }}
{%- endmacro %}

{% macro default__inspect_message_statement(database_name, queue_name, conversation_handle, timeout_ms) -%}
    {%- set path = poisonwatch.tsql_queue_path(database_name, queue_name) -%}
    {%- set batch = poisonwatch.tsql_batch_literal(
        "BEGIN TRANSACTION;\nDECLARE @message_body VARBINARY(MAX), @validation NCHAR(1);\nWAITFOR (\n    RECEIVE TOP(1) @message_body = message_body, @validation = validation\n    FROM ",
        path,
        "\n    WHERE conversation_handle = @conversation_handle\n), TIMEOUT " ~ timeout_ms ~ ";\nIF @@ROWCOUNT = 0\n    PRINT 'No message available.';\nELSE IF @validation = 'E'\n    PRINT 'Empty message.';\nELSE IF @validation = 'X'\n    PRINT CONVERT(NVARCHAR(MAX), @message_body);\nELSE\n    BEGIN\n        PRINT 'No validation -- binary message:';\n        PRINT @message_body;\n    END;\nROLLBACK TRANSACTION;"
    ) -%}
    case
        when {{ poisonwatch.is_guid(conversation_handle) }} and {{ path }} is not null
        then concat(
            {{ poisonwatch.tsql_database_context(database_name) }},
            {{ poisonwatch.remediation_text("-- Review only: the transaction always rolls back, the message stays in the queue.\nDECLARE @statement NVARCHAR(MAX) = ") }},
            {{ batch }},
            {{ poisonwatch.remediation_text(";\nEXEC @sp_executesql\n    @statement,\n    N'@conversation_handle UNIQUEIDENTIFIER',\n    @conversation_handle = ") }},
            {{ poisonwatch.tsql_string_literal("upper(" ~ conversation_handle ~ ")") }}, ';'
        )
    end
{%- endmacro %}
