{#-
    The order of a queue's or a message's attempts (docs/rules.md, "Message identity"): time,
    then the broker's attempt id, then where the attempt was logged, then its key, so that
    ties never depend on how Spark happened to read the files. For `order by` lists; `alias`
    qualifies the columns, `indent` is the indentation of the lines after the first.
-#}
{% macro attempt_order(alias, indent=4) -%}
    {%- if not poisonwatch.is_identifier(alias) -%}
        {{ exceptions.raise_compiler_error(
            "attempt_order expects a table alias, got: " ~ alias) }}
    {%- endif -%}
    {{ return(adapter.dispatch('attempt_order', 'poisonwatch')(alias, indent | int)) }}
{%- endmacro %}

{% macro default__attempt_order(alias, indent) -%}
    {%- set columns = ['attempted_at', 'attempt_id', 'source_file', 'record_number', 'attempt_key'] -%}
    {%- set qualified = [] -%}
    {%- for column in columns -%}
        {%- do qualified.append(alias ~ '.' ~ column) -%}
    {%- endfor -%}
    {{ qualified | join(',\n' ~ ' ' * indent) }}
{%- endmacro %}
