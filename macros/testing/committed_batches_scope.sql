{#-
    For a generic test of a landing source whose meta sets `committed_batches_only`: the
    condition that keeps only the rows of batches the ingest ledger committed
    (committed_batches_condition on `_batch_id`), so that an orphan batch, the rows of an
    ingest killed before its ledger row, is never what a test checks. '' for every other
    test, and at parse time: the ledger is read only when the test runs, so it is not one of
    the test's parents and an ingest's build does not select every landing test through it.
-#}
{% macro committed_batches_scope() -%}
    {{ return(adapter.dispatch('committed_batches_scope', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__committed_batches_scope() -%}
    {%- set tested = poisonwatch.tested_resource() -%}
    {%- if tested is none or not tested.meta.get('committed_batches_only') -%}
        {{ return('') }}
    {%- endif -%}
    {%- if tested.node.get('resource_type') != 'source' -%}
        {{ exceptions.raise_compiler_error(
            "meta.committed_batches_only of " ~ tested.node.unique_id
            ~ " is for landing sources (a raw table with _batch_id)") }}
    {%- endif -%}
    {{ return(poisonwatch.committed_batches_condition(
        '_batch_id', source('ingest', 'ingested_files'))) }}
{%- endmacro %}
