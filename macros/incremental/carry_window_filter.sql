{#-
    The `where` clause with which an incremental run of a gaps-and-islands model reads the
    state it carries over its cutoff: the model's own rows in partitions before `cutoff`, but
    only from the latest partition on that still holds a row of every key in `needed_keys_sql`
    (the keys this run recomputes). Each such key's last row before the cutoff is then among
    the rows read, so the carried state is the one all of history gives, and a run reads the
    last few partitions instead of every partition it keeps.

    Read at run time: the partitions from `show partitions` (metastore only), the needed keys
    once, then the keys of the last 1, 4, 16, ... partitions before the cutoff until none is
    missing. A key with no row before the cutoff (a new queue or consumer) makes the probes
    reach the first partition: every partition before the cutoff is read, as without this
    macro. So is every one while parsing, or when a partition name is not a time bucket.
    `where false` when there is no cutoff (nothing new: read nothing).
-#}
{% macro carry_window_filter(relation, partition_column, cutoff, key_columns, needed_keys_sql) -%}
    {%- if relation is none or not poisonwatch.is_identifier(partition_column)
        or not poisonwatch.is_identifier_list(key_columns) or needed_keys_sql is not string -%}
        {{ exceptions.raise_compiler_error(
            "carry_window_filter expects a relation, a partition column, a list of key columns "
            ~ "and a query of the needed keys, got: " ~ relation ~ ", " ~ partition_column
            ~ ", " ~ key_columns) }}
    {%- endif -%}
    {{ return(adapter.dispatch('carry_window_filter', 'poisonwatch')(
        relation, partition_column, cutoff, key_columns, needed_keys_sql)) }}
{%- endmacro %}

{% macro default__carry_window_filter(
    relation, partition_column, cutoff, key_columns, needed_keys_sql
) -%}
    {%- set everything = partition_bound_filter(partition_column, '<', cutoff) -%}
    {%- if not execute or not cutoff -%}
        {{ return(everything) }}
    {%- endif -%}
    {%- set partitions = time_bucket_partitions(relation, partition_column) -%}
    {%- if partitions is none -%}
        {{ return(everything) }}
    {%- endif -%}
    {%- set before = [] -%}
    {%- for value in partitions if value < cutoff -%}
        {%- do before.append(value) -%}
    {%- endfor -%}
    {%- if before | length == 0 -%}
        {{ return(everything) }}
    {%- endif -%}
    {%- set state = namespace(start=none, done=false) -%}
    {%- set keys = key_columns | join(', ') -%}
    {%- set needed = {} -%}
    {%- for row in run_query('select distinct ' ~ keys ~ ' from (' ~ needed_keys_sql ~ ') as needed') -%}
        {%- do needed.update({row.values() | map('string') | join('\x1f'): true}) -%}
    {%- endfor -%}
    {%- if needed | length == 0 -%}
        {{ return(everything) }}
    {%- endif -%}
    {%- for span in [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536] -%}
        {%- if state.done -%}
        {%- elif span >= before | length -%}
            {%- set state.done = true -%}
        {%- else -%}
            {%- set start = before[before | length - span] -%}
            {%- set window -%}
                {{ everything }} and {{ partition_column }} >= {{ string_literal_list([start]) }}
            {%- endset -%}
            {%- set seen = {} -%}
            {%- for row in run_query('select distinct ' ~ keys ~ ' from ' ~ relation ~ ' ' ~ window) -%}
                {%- do seen.update({row.values() | map('string') | join('\x1f'): true}) -%}
            {%- endfor -%}
            {%- set missing = needed.keys() | reject('in', seen) | list -%}
            {%- if missing | length == 0 -%}
                {%- set state.start = start -%}
                {%- set state.done = true -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if state.start is none -%}
        {{ return(everything) }}
    {%- endif -%}
    {{ return(everything ~ ' and ' ~ partition_column ~ ' >= ' ~ string_literal_list([state.start])) }}
{%- endmacro %}
