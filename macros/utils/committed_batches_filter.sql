{#-
    The `where` clause that keeps a raw row only when its landing batch is committed:
    `poisonwatch ingest` appends the ledger (ingested_files) last, so the rows of a run killed
    before that are not real (the next ingest drops them and loads the same files again under
    a new batch). A filter on the partition column `_batch_id` itself, so that a filter on
    batch_id downstream still prunes partitions. `landed` is the raw table's alias in the
    query, `ledger` the ingested_files relation (a source(), so that it stays in the staging
    model).
-#}
{% macro committed_batches_filter(landed, ledger) -%}
    {%- if not poisonwatch.is_identifier(landed)
        or ledger is none -%}
        {{ exceptions.raise_compiler_error(
            "committed_batches_filter expects a table alias and the ingested_files relation, got: "
            ~ landed ~ ", " ~ ledger) }}
    {%- endif -%}
    {{ return(adapter.dispatch('committed_batches_filter', 'poisonwatch')(landed, ledger)) }}
{%- endmacro %}

{% macro default__committed_batches_filter(landed, ledger) -%}
where {{ poisonwatch.committed_batches_condition(landed ~ '._batch_id', ledger) }}
{%- endmacro %}
