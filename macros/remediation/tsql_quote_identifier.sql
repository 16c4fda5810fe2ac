{#- SQL expression: the value of `expression` as a bracket-quoted T-SQL identifier, `]` doubled;
    null when the value is null, empty or longer than 128 characters (sysname). -#}
{% macro tsql_quote_identifier(expression) -%}
    {{ return(adapter.dispatch('tsql_quote_identifier', 'poisonwatch')(expression)) }}
{%- endmacro %}

{% macro default__tsql_quote_identifier(expression) -%}
    case
        when {{ expression }} is null or length({{ expression }}) = 0 or length({{ expression }}) > 128 then null
        else '[' || replace({{ expression }}, ']', ']]') || ']'
    end
{%- endmacro %}

{% macro spark__tsql_quote_identifier(expression) -%}
    case
        when {{ expression }} is null or length({{ expression }}) = 0 or length({{ expression }}) > 128 then null
        else concat('[', replace({{ expression }}, ']', ']]'), ']')
    end
{%- endmacro %}
