{#-
    A list of values as comma-separated Spark SQL string literals, for an `in (...)` whose
    values were read at run time (batch ids, partition names): each value is escaped, never
    spliced. An empty list is an error: `in ()` is not SQL, and the caller must decide what
    "nothing" means.
-#}
{% macro string_literal_list(values) -%}
    {%- if values is string or values is none or values | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "string_literal_list expects a non-empty list, got: " ~ values) }}
    {%- endif -%}
    {{ return(adapter.dispatch('string_literal_list', 'poisonwatch')(values)) }}
{%- endmacro %}

{% macro default__string_literal_list(values) -%}
    {%- for value in values -%}
        '{{ value | string | replace("\\", "\\\\") | replace("'", "\\'") }}'
        {%- if not loop.last %}, {% endif -%}
    {%- endfor -%}
{%- endmacro %}
