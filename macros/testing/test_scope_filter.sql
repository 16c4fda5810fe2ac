{#-
    The rows a generic test checks on the relation it tests, from the tested model's or
    source table's `meta.tests_check_latest`: a column that tells the rows the latest build
    wrote or landed.
    - A run's stamp (`sequenced_at`, `rewritten_at` of an incremental model): the rows stamped
      after POISONWATCH_CHANGED_SINCE, the stamp of the last build `poisonwatch build`
      recorded (changed_since_bound), a literal that file statistics skip by.
    - A landing batch (`batch_id`, `_batch_id`): the batches after POISONWATCH_BATCHES_SINCE,
      the newest batch that build had seen; batch ids sort after every committed one, so
      these are the batches landed since, however many ingests ran in between.
    Without the variable (a build of the whole selector, a plain `dbt build`), every row:
    dbt's own meaning of a test. Returns '' for every row, and at parse time (the variables
    are read when the test runs). Called from get_where_subquery with the current test node
    as `model`.
-#}
{% macro test_scope_filter(relation) -%}
    {{ return(adapter.dispatch('test_scope_filter', 'poisonwatch')(relation)) }}
{%- endmacro %}

{% macro default__test_scope_filter(relation) -%}
    {%- if not execute or flags.FULL_REFRESH or model is not mapping -%}
        {{ return('') }}
    {%- endif -%}
    {%- set found = poisonwatch.tested_resource() -%}
    {%- if found is none -%}
        {{ return('') }}
    {%- endif -%}
    {%- set column = found.meta.get('tests_check_latest') -%}
    {%- if not column -%}
        {{ return('') }}
    {%- endif -%}
    {%- if column not in ('sequenced_at', 'rewritten_at', 'batch_id', '_batch_id') -%}
        {{ exceptions.raise_compiler_error(
            "meta.tests_check_latest of " ~ found.node.unique_id
            ~ " must be a run's stamp (sequenced_at, rewritten_at) or a landing batch"
            ~ " (batch_id, _batch_id), got: " ~ column) }}
    {%- endif -%}
    {%- if column in ('batch_id', '_batch_id') -%}
        {%- set since = env_var('POISONWATCH_BATCHES_SINCE', '') -%}
        {%- if since and not modules.re.fullmatch('b\\d{8}T\\d{6}Z_[0-9a-f]{8}', since) -%}
            {{ exceptions.raise_compiler_error(
                "POISONWATCH_BATCHES_SINCE must be a batch id (bYYYYMMDDTHHMMSSZ_xxxxxxxx),"
                ~ " got: " ~ since) }}
        {%- endif -%}
        {{ return(column ~ " > '" ~ since ~ "'" if since else '') }}
    {%- endif -%}
    {%- if not env_var('POISONWATCH_CHANGED_SINCE', '') -%}
        {{ return('') }}
    {%- endif -%}
    {{ return(column ~ ' > ' ~ poisonwatch.changed_since_bound(column)) }}
{%- endmacro %}
