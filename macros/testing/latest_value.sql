{#-
    The greatest value of `column` in `relation` and its Spark type, read once per relation and
    column in a dbt invocation: `{'type': <type>, 'value': <text or none>}` (value none when the
    relation holds no value), or none when the relation does not exist yet. Cached in the
    invocation's graph, which every node shares: the callers (scoped data tests, the watermark
    post-hooks) run after the relation was built, and nothing rebuilds it in the same run.
    Only timestamp, date, string and integer columns are accepted.
-#}
{% macro latest_value(relation, column) -%}
    {%- if relation is none or relation is string or not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "latest_value expects a relation and one column name, got: "
            ~ relation ~ ", " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('latest_value', 'poisonwatch')(relation, column)) }}
{%- endmacro %}

{% macro default__latest_value(relation, column) -%}
    {%- set cache = graph.setdefault('poisonwatch_latest_values', {})
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
                "column " ~ column ~ " of " ~ relation
                ~ " must be a timestamp, date, string or integer to take its latest value, got: "
                ~ value_type) }}
        {%- endif -%}
        {%- do cache.update({key: {
            'type': value_type,
            'value': none if row[1] is none else row[1][1:],
        }}) -%}
    {%- endif -%}
    {{ return(cache[key]) }}
{%- endmacro %}
