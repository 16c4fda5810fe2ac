{#-
    The greatest value of `column` in `relation` as a constant SQL expression
    (`cast('<value>' as <type>)`), read once per relation and column in a dbt invocation: none
    when the relation does not exist yet, '' when it holds no value. A constant lets Spark skip
    what the latest run did not write (partition pruning on `_batch_id`, Parquet row-group
    statistics on `sequenced_at`), where `= (select max(...))` read every row of history in
    every test. The value is latest_value's, read once per invocation; `partition_column`
    goes to latest_value, which then lists the partitions holding that value in the same scan;
    so does `where`, a condition on the relation's rows (the committed batches of a landing
    source: committed_batches_scope).
-#}
{% macro latest_scope_value(relation, column, partition_column=none, where=none) -%}
    {%- if relation is none or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "latest_scope_value expects a relation and one column name, got: "
            ~ relation ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('latest_scope_value', 'poisonwatch')(
        relation, column, partition_column, where)) }}
{%- endmacro %}

{% macro default__latest_scope_value(relation, column, partition_column=none, where=none) -%}
    {%- set latest = poisonwatch.latest_value(relation, column, partition_column, where=where) -%}
    {%- if latest is none -%}
        {{ return(none) }}
    {%- elif latest.value is none -%}
        {{ return('') }}
    {%- endif -%}
    {{ return('cast(' ~ poisonwatch.string_literal_list([latest.value]) ~ ' as '
        ~ latest.type ~ ')') }}
{%- endmacro %}
