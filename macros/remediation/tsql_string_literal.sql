{#- SQL expression: the value of `expression` as a T-SQL string expression that stays inert for
    sqlcmd, go-sqlcmd and SSMS: an N'...' literal of tsql_inert_text, cut to `max_length`
    characters; the text NULL when the value is null. The value arrives exactly; the result
    may be an expression (N'a' + NCHAR(10) + N'b'), so it goes into a DECLARE or a function
    call, never straight into an EXEC parameter. -#}
{% macro tsql_string_literal(expression, max_length=none) -%}
    {% if max_length is not none and (max_length is not number or max_length < 1) %}
        {{ exceptions.raise_compiler_error("tsql_string_literal: max_length must be a positive integer, got " ~ max_length) }}
    {% endif %}
    {%- set value = "cast(" ~ expression ~ " as " ~ dbt.type_string() ~ ")" -%}
    {%- if max_length is not none %}{% set value = "substring(" ~ value ~ ", 1, " ~ max_length ~ ")" %}{% endif -%}
    coalesce(concat({{ poisonwatch.remediation_text("N'") }}, {{ poisonwatch.tsql_inert_text(value) }}, {{ poisonwatch.remediation_text("'") }}), 'NULL')
{%- endmacro %}

{#- SQL expression: a T-SQL N'...' literal of constant `head`, the value of `expression` and
    constant `tail` (template text: its quotes doubled here, its line breaks kept as the
    script's own lines), the value made inert by tsql_inert_text. For dynamic SQL batches that
    carry a value inside. Null when the value is null. -#}
{% macro tsql_batch_literal(head, expression, tail) -%}
    concat(
        {{ poisonwatch.remediation_text("N'" ~ head | replace("'", "''")) }},
        {{ poisonwatch.tsql_inert_text(expression) }},
        {{ poisonwatch.remediation_text(tail | replace("'", "''") ~ "'") }}
    )
{%- endmacro %}

{#- SQL expression: the value's text for inside a T-SQL N'...' literal, inert for every reader
    of the script: quotes doubled; line breaks and other control characters taken out of the
    literal as ' + NCHAR(n) + N' (no value adds a line to the script); a `\` before a quote,
    another `\` or the end as NCHAR(92) (go-sqlcmd reads `\` as an escape inside '...' and
    would lose track of the quotes; before a line break it would be a line continuation); `$(`
    split as $' + N'( (no sqlcmd variable). Null when the value is null. -#}
{% macro tsql_inert_text(expression) -%}
    {{ return(adapter.dispatch('tsql_inert_text', 'poisonwatch')(expression)) }}
{%- endmacro %}

{#- private: the code points taken out of a literal: the C0 controls but tab, NEL, LS, PS. -#}
{% macro _tsql_inert_codes() -%}
    {{ return(range(0, 9) | list + range(10, 32) | list + [133, 8232, 8233]) }}
{%- endmacro %}

{% macro default__tsql_inert_text(expression) -%}
    {%- set ns = namespace(text="replace(cast(" ~ expression ~ " as " ~ dbt.type_string() ~ "), '''', '''''')") -%}
    {%- for code in poisonwatch._tsql_inert_codes() -%}
        {%- set ns.text = "replace(" ~ ns.text ~ ", chr(" ~ code ~ "), ''' + NCHAR(" ~ code ~ ") + N''')" -%}
    {%- endfor -%}
    {%- set ns.text = "regexp_replace(" ~ ns.text ~ ", " ~ poisonwatch.remediation_text("\\\\(?=[\\\\']|$)") ~ ", ''' + NCHAR(92) + N''')" -%}
    replace({{ ns.text }}, '$(', '$'' + N''(')
{%- endmacro %}

{#- One aggregate() over the code points instead of one replace() per code point: the same
    replacements in the same order, without an expression nested thirty levels deep. -#}
{% macro spark__tsql_inert_text(expression) -%}
    replace(
        regexp_replace(
            aggregate(
                array({{ poisonwatch._tsql_inert_codes() | join(', ') }}),
                replace(cast({{ expression }} as string), chr(39), concat(chr(39), chr(39))),
                (inert_text, code) -> replace(
                    inert_text,
                    decode(unhex(lpad(hex(code), 4, '0')), 'UTF-16BE'),
                    concat('\' + NCHAR(', cast(code as string), ') + N\'')
                )
            ),
            {{ poisonwatch.remediation_text("\\\\(?=[\\\\']|\\z)") }},
            '\' + NCHAR(92) + N\''
        ),
        '$(',
        '$\' + N\'('
    )
{%- endmacro %}
