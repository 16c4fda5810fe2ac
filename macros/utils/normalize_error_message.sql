{#-
    Normalises an error message for grouping (as ServiceControl groups failed messages):
    GUIDs become <guid>, quoted literals ('...' or "...") become <literal>, numbers
    (integers, decimals, hex 0x...) become <number>; whitespace is collapsed.
    Order matters: GUIDs and literals first, so their digits are not counted as numbers.
-#}
{% macro normalize_error_message(column) -%}
    {%- if column is none or column == '' -%}
        {{ exceptions.raise_compiler_error("normalize_error_message needs a column") }}
    {%- endif -%}
    {{ return(adapter.dispatch('normalize_error_message', 'poisonwatch')(column)) }}
{%- endmacro %}

{% macro default__normalize_error_message(column) -%}
    trim(regexp_replace(
        regexp_replace(
            regexp_replace(
                regexp_replace(
                    regexp_replace(
                        {{ column }},
                        '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}',
                        '<guid>'
                    ),
                    '\'[^\']*\'',
                    '<literal>'
                ),
                '"[^"]*"',
                '<literal>'
            ),
            '(0x[0-9a-fA-F]+|[0-9]+([.,][0-9]+)*)',
            '<number>'
        ),
        '\\s+',
        ' '
    ))
{%- endmacro %}
