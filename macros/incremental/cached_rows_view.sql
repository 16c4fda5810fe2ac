{#-
    The name of the temporary view cache_rows fills for `relation` (a model): its identifier
    with `__pw_new_rows` appended, unqualified (temporary views have no schema).
-#}
{% macro cached_rows_view(relation) -%}
    {%- if relation is none or not poisonwatch.is_identifier(relation.identifier) -%}
        {{ exceptions.raise_compiler_error(
            "cached_rows_view expects a model's relation, got: " ~ relation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('cached_rows_view', 'poisonwatch')(relation)) }}
{%- endmacro %}

{% macro default__cached_rows_view(relation) -%}
    {{ return(relation.identifier ~ '__pw_new_rows') }}
{%- endmacro %}
