{#-
    A deterministic key from a list of columns/expressions: sha2-256 hex of the values joined
    with '|', nulls spelt '_null_' so (a, null) and (null, a) differ. dbt-utils'
    generate_surrogate_key, with sha2 (the mart contract) instead of md5. Each value is escaped
    first (key_text), so that no choice of values makes two tuples one key: ('a|b', 'c') and
    ('a', 'b|c') differ, and so do null and the text '_null_'. An item may also be a mapping
    {'encoded': expression}: a part the caller already built from key_text parts.
-#}
{% macro surrogate_key(field_list) -%}
    {%- if field_list is string or field_list | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "surrogate_key expects a non-empty list of columns, got: " ~ field_list) }}
    {%- endif -%}
    {{ return(adapter.dispatch('surrogate_key', 'poisonwatch')(field_list)) }}
{%- endmacro %}

{% macro default__surrogate_key(field_list) -%}
    sha2(concat_ws('|'
    {%- for field in field_list -%}
        {%- set part = field['encoded'] if field is mapping else poisonwatch.key_text(field) -%}
        , coalesce({{ part }}, '_null_')
    {%- endfor -%}
    ), 256)
{%- endmacro %}

{#-
    One key part as text that cannot contain the separator: '%' and '|' percent-encoded, the
    text '_null_' (the spelling of null) as '%5Fnull_'; null stays null. A value with none of
    those is unchanged, so keys already stored in the ledgers stay the same for it.
-#}
{% macro key_text(expression) -%}
    case
        when cast({{ expression }} as string) = '_null_' then '%5Fnull_'
        else replace(replace(cast({{ expression }} as string), '%', '%25'), '|', '%7C')
    end
{%- endmacro %}
