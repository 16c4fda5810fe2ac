{#-
    The greatest value of `column` in `relation` as a constant SQL expression
    (`cast('<value>' as <type>)`), read once per relation and column in a dbt invocation: none
    when the relation does not exist yet, '' when it holds no value. A constant lets Spark skip
    what the latest run did not write (partition pruning on `_batch_id`, Parquet row-group
    statistics on `sequenced_at`), where `= (select max(...))` read every row of history in
    every test. The value is cached in the invocation's graph, which every test node shares:
    the tests of a relation run after it was built, and nothing rebuilds it in the same run.
-#}
{% macro latest_scope_value(relation, column) -%}
    {%- if relation is none or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "latest_scope_value expects a relation and one column name, got: "
            ~ relation ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('latest_scope_value', 'poisonwatch')(relation, column)) }}
{%- endmacro %}

{% macro default__latest_scope_value(relation, column) -%}
    {%- set cache = graph.setdefault('poisonwatch_latest_scope_values', {})
        if graph is mapping else {} -%}
    {%- set key = relation ~ '|' ~ column -%}
    {%- if key not in cache -%}
        {%- if load_relation(relation) is none -%}
            {{ return(none) }}
        {%- endif -%}
        {#- The 'v' prefix keeps the values text: agate would read a date-like text as a date. -#}
        {%- set query -%}
            select
                concat('v', typeof(max({{ column }}))) as value_type,
                concat('v', cast(max({{ column }}) as string)) as newest_value
            from {{ relation }}
        {%- endset -%}
        {%- set row = run_query(query).rows[0] -%}
        {%- set value_type = row[0][1:] -%}
        {%- if value_type not in ('timestamp', 'date', 'string', 'bigint', 'int') -%}
            {{ exceptions.raise_compiler_error(
                "meta.tests_check_latest column " ~ column ~ " of " ~ relation
                ~ " must be a timestamp, date, string or integer, got: " ~ value_type) }}
        {%- endif -%}
        {%- if row[1] is none -%}
            {%- do cache.update({key: ''}) -%}
        {%- else -%}
            {%- do cache.update({key: 'cast(' ~ poisonwatch.string_literal_list([row[1][1:]])
                ~ ' as ' ~ value_type ~ ')'}) -%}
        {%- endif -%}
    {%- endif -%}
    {{ return(cache[key]) }}
{%- endmacro %}
