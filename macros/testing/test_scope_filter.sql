{#-
    The rows a generic test checks on the relation it tests, from the tested model's or
    source table's `meta.tests_check_latest`: a column whose greatest value marks what the
    latest run wrote (`sequenced_at` of an incremental model: the partitions its latest run
    rewrote; `batch_id` / `_batch_id` of landing data: the latest ingest run's batch).
    On a model partitioned by one other column, the partitions holding that value are named
    as well (`cast(<partition> as string) in (...)`, found in the same scan as the value), so
    that Spark prunes the others instead of opening every file to skip it by its statistics.
    On a landing source that reads committed batches only (committed_batches_scope), the
    latest batch is the latest committed one.
    Returns '' (every row) when the resource sets no such column, during `--full-refresh`,
    and at parse time. Called from get_where_subquery with the current test node as `model`.
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
    {%- set tested, meta = found.node, found.meta -%}
    {#- A landing source's latest batch is its latest committed one (committed_batches_scope):
        an orphan batch sorts after every committed one and would hide it. -#}
    {%- set committed = poisonwatch.committed_batches_scope() or none -%}
    {%- set column = meta.get('tests_check_latest') -%}
    {%- if not column -%}
        {{ return('') }}
    {%- endif -%}
    {%- if not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "meta.tests_check_latest of " ~ tested.unique_id
            ~ " must be one column name, got: " ~ column) }}
    {%- endif -%}
    {#- A model partitioned by one other column: the partitions holding the newest value are
        named too, so Spark prunes the rest instead of opening every file to skip it. -#}
    {%- set partition_by = (tested.get('config') or {}).get('partition_by') -%}
    {%- if partition_by is string -%}
        {%- set partition_by = [partition_by] -%}
    {%- endif -%}
    {%- set partition_column = partition_by[0]
        if partition_by is sequence and partition_by | length == 1
            and partition_by[0] != column and poisonwatch.is_identifier(partition_by[0])
        else none -%}
    {%- set newest = poisonwatch.latest_scope_value(
        relation, column, partition_column, committed) -%}
    {%- if newest is none -%}
        {{ return('') }}
    {%- endif -%}
    {%- set partitions = none -%}
    {%- if newest and partition_column is not none -%}
        {%- set partitions = poisonwatch.latest_value(
            relation, column, partition_column, where=committed).partitions -%}
    {%- endif -%}
    {%- if partitions -%}
        {{ return('cast(' ~ partition_column ~ ' as string) in ('
            ~ poisonwatch.string_literal_list(partitions) ~ ') and ' ~ column ~ ' = ' ~ newest) }}
    {%- endif -%}
    {#- No value at all (an empty relation): the subquery finds none either, and costs nothing
        there; a constant `false` makes Spark 4 fail on some views (ASSIGNMENT_ARITY_MISMATCH). -#}
    {%- set where = '' if committed is none else ' where ' ~ committed -%}
    {{ return(column ~ ' = ' ~ (newest
        or '(select max(' ~ column ~ ') from ' ~ relation ~ where ~ ')')) }}
{%- endmacro %}
