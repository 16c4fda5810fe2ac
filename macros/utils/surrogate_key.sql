{#-
    A deterministic key from a list of columns/expressions: sha2-256 hex of the values joined
    with '|', nulls spelt '_null_' so (a, null) and (null, a) differ. dbt-utils'
    generate_surrogate_key, with sha2 (the mart contract) instead of md5.
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
        , coalesce(cast({{ field }} as string), '_null_')
    {%- endfor -%}
    ), 256)
{%- endmacro %}
