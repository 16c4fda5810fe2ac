{#- SQL expression: T-SQL that takes one Service Broker message out of its queue without ending the
    conversation: receive the conversation's next message and, only when it is the expected one
    (same sequence number), keep it and commit; otherwise roll back and leave the queue as it was.
    - `target_table` null: the message is dropped (discard of a disposable message, seed 000).
    - `target_table` set: it is stored there first (dead-letter table, or seed 004's holding table
      for `park`, with a due time `delay_minutes` from now).
    Values travel as sp_executesql parameters, the batch in a variable (its inert literal is an
    expression). Null when the handle is not a GUID, a name is not a
    valid identifier, or the sequence number is missing. -#}
{% macro receive_message_statement(database_name, queue_name, conversation_handle, message_sequence_number, target_table=none, delay_minutes=none) -%}
    {% set table_parts = target_table.split('.') if target_table is string else [] %}
    {% if target_table is not none and (table_parts | length != 2 or not poisonwatch.is_identifier(table_parts[0]) or not poisonwatch.is_identifier(table_parts[1])) %}
        {{ exceptions.raise_compiler_error("receive_message_statement: target_table must be schema.table, got " ~ target_table) }}
    {% endif %}
    {% if delay_minutes is not none and target_table is none %}
        {{ exceptions.raise_compiler_error("receive_message_statement: delay_minutes needs a target_table to keep the message in") }}
    {% endif %}
    {{ return(adapter.dispatch('receive_message_statement', 'poisonwatch')(database_name, queue_name, conversation_handle, message_sequence_number, target_table, delay_minutes)) }}
{%- endmacro %}

{% macro default__receive_message_statement(database_name, queue_name, conversation_handle, message_sequence_number, target_table, delay_minutes) -%}
    {%- set path = poisonwatch.tsql_queue_path(database_name, queue_name) -%}
    {%- if target_table is none -%}
        {%- set keep = "" -%}
    {%- elif delay_minutes is none -%}
        {%- set keep = "        INSERT INTO [" ~ target_table.split('.') | join('].[') ~ "] (conversation_handle, message_sequence_number, message_type_name, message_body, received_at)\n            VALUES (@conversation_handle, @message_sequence_number, @message_type_name, @message_body, SYSUTCDATETIME());\n" -%}
    {%- else -%}
        {%- set keep = "        INSERT INTO [" ~ target_table.split('.') | join('].[') ~ "] (conversation_handle, message_sequence_number, message_type_name, message_body, due_at)\n            VALUES (@conversation_handle, @message_sequence_number, @message_type_name, @message_body, DATEADD(MINUTE, @delay_minutes, SYSUTCDATETIME()));\n" -%}
    {%- endif -%}
    {%- set batch = poisonwatch.tsql_batch_literal(
        "BEGIN TRANSACTION;\nDECLARE @message_body VARBINARY(MAX), @message_type_name NVARCHAR(256), @message_sequence_number BIGINT;\nRECEIVE TOP(1) @message_body = message_body, @message_type_name = message_type_name, @message_sequence_number = message_sequence_number\n    FROM ",
        path,
        "\n    WHERE conversation_handle = @conversation_handle;\nIF @@ROWCOUNT = 1 AND @message_sequence_number = @expected_sequence_number\n    BEGIN\n" ~ keep ~ "        COMMIT TRANSACTION;\n    END;\nELSE\n    ROLLBACK TRANSACTION;"
    ) -%}
    case
        when {{ poisonwatch.is_guid(conversation_handle) }} and {{ path }} is not null
            and {{ message_sequence_number }} is not null
            {%- if delay_minutes is not none %} and {{ delay_minutes }} is not null{% endif %}
        then concat(
            {{ poisonwatch.tsql_database_context(database_name) }},
            {{ poisonwatch.remediation_text("DECLARE @statement NVARCHAR(MAX) = ") }},
            {{ batch }},
            {{ poisonwatch.remediation_text(";\nEXEC @sp_executesql\n    @statement,\n    N'@conversation_handle UNIQUEIDENTIFIER, @expected_sequence_number BIGINT" ~ (", @delay_minutes INT" if delay_minutes is not none else "") ~ "',\n    @conversation_handle = ") }},
            {{ poisonwatch.tsql_string_literal("upper(" ~ conversation_handle ~ ")") }},
            {{ poisonwatch.remediation_text(",\n    @expected_sequence_number = ") }}, cast(cast({{ message_sequence_number }} as bigint) as {{ dbt.type_string() }})
            {%- if delay_minutes is not none %},
            {{ poisonwatch.remediation_text(",\n    @delay_minutes = ") }}, cast(cast({{ delay_minutes }} as int) as {{ dbt.type_string() }})
            {%- endif %}, ';'
        )
    end
{%- endmacro %}
