{#-
    The greatest value of `column` in `relation` and its Spark type, read once per relation and
    column in a dbt invocation: `{'type': <type>, 'value': <text or none>, 'partitions': <list
    or none>}` (value none when the relation holds no value), or none when the relation does not
    exist yet. Cached in the invocation's graph, which every node shares: the callers (scoped
    data tests) run after the relation was built, and nothing
    rebuilds it in the same run. Only timestamp, date, string and integer columns are accepted.
    With `partition_column` (the relation's one partition column), `partitions` lists, as text,
    the partitions holding rows with the greatest value, found in the same scan (grouping by
    the column instead of taking its maximum), so that a scoped test can name them and Spark
    prunes the others instead of opening every file's footer to skip it by its statistics;
    none without it, or when a null partition holds such rows.
    With `scan=false`, only what the invocation already knows (read, or said by the model
    that wrote it: remember_latest_value): none instead of a scan.
    With `where` (a condition on the relation's rows, such as committed_batches_scope's), the
    greatest value among the rows it keeps, cached apart from the unfiltered one.
-#}
{% macro latest_value(relation, column, partition_column=none, scan=true, where=none) -%}
    {%- if relation is none or relation is string or not poisonwatch.is_identifier(column)
        or not (partition_column is none or poisonwatch.is_identifier(partition_column))
        or not (where is none or (where is string and where | trim)) -%}
        {{ exceptions.raise_compiler_error(
            "latest_value expects a relation, one column name and optionally one partition"
            ~ " column name and a condition, got: " ~ relation ~ ", " ~ column ~ ", "
            ~ partition_column ~ ", " ~ where) }}
    {%- endif -%}
    {{ return(adapter.dispatch('latest_value', 'poisonwatch')(
        relation, column, partition_column, scan, where)) }}
{%- endmacro %}

{% macro default__latest_value(relation, column, partition_column=none, scan=true, where=none) -%}
    {%- set cache = graph.setdefault('poisonwatch_latest_values', {})
        if graph is mapping else {} -%}
    {%- set filtered = '' if where is none else '|' ~ where -%}
    {%- set key = relation ~ '|' ~ column ~ '|' ~ (partition_column or '') ~ filtered -%}
    {%- set rows_kept = '' if where is none else 'where ' ~ where -%}
    {%- if key not in cache -%}
        {%- if not scan or load_relation(relation) is none -%}
            {{ return(none) }}
        {%- endif -%}
        {#- The 'v' prefix keeps the values text: agate would read a date-like text as a date. -#}
        {%- if partition_column is none -%}
            {%- set query -%}
                select
                    concat('v', typeof(max({{ column }}))) as value_type,
                    concat('v', cast(max({{ column }}) as string)) as newest_value,
                    'null' as partitions_json
                from {{ relation }}
                {{ rows_kept }}
            {%- endset -%}
        {%- else -%}
            {%- set query -%}
                select
                    concat('v', typeof({{ column }})) as value_type,
                    concat('v', cast({{ column }} as string)) as newest_value,
                    case
                        when not max({{ partition_column }} is null)
                            then to_json(collect_set(cast({{ partition_column }} as string)))
                        else 'null'
                    end as partitions_json
                from {{ relation }}
                {{ rows_kept }}
                group by {{ column }}
                order by {{ column }} desc nulls last
                limit 1
            {%- endset -%}
        {%- endif -%}
        {%- set rows = run_query(query).rows -%}
        {%- if rows | length == 0 -%}
            {#- Grouped, an empty relation gives no row: no value, as max() would say. -#}
            {%- do cache.update({key: {'type': none, 'value': none, 'partitions': none}}) -%}
        {%- else -%}
            {%- set row = rows[0] -%}
            {%- set value_type = row[0][1:] -%}
            {%- if value_type not in ('timestamp', 'date', 'string', 'bigint', 'int') -%}
                {{ exceptions.raise_compiler_error(
                    "column " ~ column ~ " of " ~ relation
                    ~ " must be a timestamp, date, string or integer to take its latest value,"
                    ~ " got: " ~ value_type) }}
            {%- endif -%}
            {%- set value = none if row[1] is none else row[1][1:] -%}
            {%- do cache.update({key: {
                'type': value_type,
                'value': value,
                'partitions': none if value is none else fromjson(row[2]),
            }}) -%}
        {%- endif -%}
        {#- The same newest value serves the callers that ask without a partition column. -#}
        {%- set plain_key = relation ~ '|' ~ column ~ '|' ~ filtered -%}
        {%- if plain_key not in cache -%}
            {%- do cache.update({plain_key: {
                'type': cache[key].type, 'value': cache[key].value, 'partitions': none,
            }}) -%}
        {%- endif -%}
    {%- endif -%}
    {{ return(cache[key]) }}
{%- endmacro %}
