{#- SQL expression: the T-SQL line that points @sp_executesql at a database's own
    sys.sp_executesql, so the statements that follow (EXEC @sp_executesql …) run in that
    database. The name travels as an N'…' literal and SQL Server quotes it (QUOTENAME): no
    identifier built here reaches the script outside a string literal. Null when the name is
    null, empty or longer than 128 characters. -#}
{% macro tsql_database_context(database_name) -%}
    {{ return(adapter.dispatch('tsql_database_context', 'poisonwatch')(database_name)) }}
{%- endmacro %}

{% macro default__tsql_database_context(database_name) -%}
    case
        when {{ poisonwatch.tsql_quote_identifier(database_name) }} is not null
        then concat(
            'DECLARE @sp_executesql NVARCHAR(400) = QUOTENAME(',
            {{ poisonwatch.tsql_string_literal(database_name) }},
            {{ poisonwatch.remediation_text(") + N'.sys.sp_executesql';\n") }}
        )
    end
{%- endmacro %}
