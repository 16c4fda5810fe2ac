{#-
    For a model that knows, while it runs, the greatest value it writes to a column and the
    partitions holding it: puts them in latest_value's cache for the rest of the invocation, so
    the scoped data tests downstream do not scan the table again
    to find what the model already knew. int_receive_attempts_sequenced calls it on an
    incremental run: every partition it rewrites holds its run's `sequenced_at`, and no other
    partition does (the scan it saves read `sequenced_at` from every attempt of history).
    The value must be what latest_value would read: text as `cast(<column> as string)` gives it.
-#}
{% macro remember_latest_value(
    relation, column, value_type, value, partition_column, partitions
) -%}
    {%- if relation is none or relation is string or not poisonwatch.is_identifier(column)
        or not poisonwatch.is_identifier(partition_column)
        or value_type not in ('timestamp', 'date', 'string', 'bigint', 'int')
        or value is not string or partitions is string or partitions is not iterable
        or partitions | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "remember_latest_value expects a relation, a column, its type, a value as text, the"
            ~ " partition column and the partitions holding the value, got: " ~ relation ~ ", "
            ~ column ~ ", " ~ value_type ~ ", " ~ value ~ ", " ~ partition_column ~ ", "
            ~ partitions) }}
    {%- endif -%}
    {{ return(adapter.dispatch('remember_latest_value', 'poisonwatch')(
        relation, column, value_type, value, partition_column, partitions)) }}
{%- endmacro %}

{% macro default__remember_latest_value(
    relation, column, value_type, value, partition_column, partitions
) -%}
    {%- if not execute or graph is not mapping -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set cache = graph.setdefault('poisonwatch_latest_values', {}) -%}
    {%- set partitions = partitions | map('string') | unique | sort | list -%}
    {%- do cache.update({
        relation ~ '|' ~ column ~ '|' ~ partition_column: {
            'type': value_type,
            'value': value,
            'partitions': partitions,
        },
        relation ~ '|' ~ column ~ '|': {'type': value_type, 'value': value, 'partitions': none},
    }) -%}
{%- endmacro %}
