{#-
    The condition alone, for the readers that add it to conditions of their own: the data
    tests of the landing sources (get_where_subquery). `batch_column` is the `_batch_id`
    column, qualified or not.
-#}
{% macro committed_batches_condition(batch_column, ledger) -%}
    {%- set parts = batch_column.split('.') if batch_column is string else [none] -%}
    {%- set bad = [] -%}
    {%- for part in parts if not poisonwatch.is_identifier(part) -%}
        {%- do bad.append(part) -%}
    {%- endfor -%}
    {%- if bad or ledger is none -%}
        {{ exceptions.raise_compiler_error(
            "committed_batches_condition expects the batch column and the ingested_files"
            ~ " relation, got: " ~ batch_column ~ ", " ~ ledger) }}
    {%- endif -%}
    {{ return(adapter.dispatch('committed_batches_condition', 'poisonwatch')(
        batch_column, ledger)) }}
{%- endmacro %}

{% macro default__committed_batches_condition(batch_column, ledger) -%}
{{ batch_column }} in (
    select committed._batch_id
    from {{ ledger }} as committed
)
{%- endmacro %}
