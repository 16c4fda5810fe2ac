{#-
    Which partitions an incremental run of a gaps-and-islands model (a run of rows per key that
    a reset row ends, e.g. a queue's consecutive rollbacks) rewrites, as segments: stretches of
    consecutive partitions, each ordered again on its own from the state carried into it.

    A new row changes the rows after it up to its key's next reset and no further. So each
    stretch of consecutive partitions holding new rows is one segment, and a segment whose
    rows may change the partitions after it (a key with no reset after its last new row in
    the segment: it "leaks") takes in the next partition, up to `max_extensions` times. The
    segment holding the newest partition never leaks: nothing comes after it. Every row
    outside the segments, and every key's last row in a segment that does not leak, keeps
    its value, so the state carried into a segment can be read from the model's own rows.
    A late attempt in the middle of history then rewrites its hour or two, not every
    partition after it.

    `new_rows_sql` selects the new rows with `key_column` (a column, or a list of columns that
    together name one stream), the order columns (`order_columns`, by default attempt_order's),
    `partition_column` (their time bucket) and what `reset_condition` reads.
    Returns [start, end] pairs of partition names, oldest first ([] when nothing is new). More
    than `max_segments` stretches, a leak still open after the extensions, or a partition name
    that is not a time bucket give one segment from the earliest new partition on: every
    partition from the earliest new row on, as a plain cutoff would.
-#}
{% macro rewrite_segments(
    relation, new_rows_sql, partition_column, key_column, reset_condition,
    max_segments=8, max_extensions=6, order_columns=none
) -%}
    {%- set key_columns = [key_column] if key_column is string else key_column -%}
    {%- if relation is none or new_rows_sql is not string
        or not poisonwatch.is_identifier(partition_column)
        or not poisonwatch.is_identifier_list(key_columns)
        or not (order_columns is none or poisonwatch.is_identifier_list(order_columns))
        or reset_condition is not string -%}
        {{ exceptions.raise_compiler_error(
            "rewrite_segments expects a relation, a query of the new rows, a partition column, "
            ~ "a key column or list of them, a reset condition and a list of order columns, "
            ~ "got: " ~ relation ~ ", " ~ partition_column ~ ", " ~ key_column ~ ", "
            ~ reset_condition ~ ", " ~ order_columns) }}
    {%- endif -%}
    {{ return(adapter.dispatch('rewrite_segments', 'poisonwatch')(
        relation, new_rows_sql, partition_column, key_columns, reset_condition,
        max_segments | int, max_extensions | int, order_columns)) }}
{%- endmacro %}

{% macro default__rewrite_segments(
    relation, new_rows_sql, partition_column, key_columns, reset_condition,
    max_segments, max_extensions, order_columns
) -%}
    {%- if not execute -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set state = namespace(done=false, fallback=none, segments=[]) -%}
    {%- set new_partitions = {} -%}
    {%- for row in run_query(
        'select distinct ' ~ partition_column ~ ' from (' ~ new_rows_sql ~ ') as new_rows'
    ) -%}
        {%- do new_partitions.update({row[0] | string: true}) -%}
    {%- endfor -%}
    {%- if new_partitions | length == 0 -%}
        {{ return([]) }}
    {%- endif -%}
    {%- set existing = time_bucket_partitions(relation, partition_column) -%}
    {%- set first_new = new_partitions.keys() | sort | first -%}
    {%- if existing is none -%}
        {{ return([[first_new, '9999-12-31 23:59:59']]) }}
    {%- endif -%}
    {%- set names = {} -%}
    {%- do names.update(new_partitions) -%}
    {%- for value in existing -%}
        {%- do names.update({value: true}) -%}
    {%- endfor -%}
    {%- set partitions = names.keys() | sort -%}
    {%- set everything_from_first_new = [[first_new, partitions | last]] -%}
    {#- Stretches of consecutive partitions holding new rows, as [first, last] indexes. -#}
    {%- for value in partitions -%}
        {%- if value in new_partitions -%}
            {%- if state.segments and state.segments[-1][1] == loop.index0 - 1 -%}
                {%- set start = state.segments.pop()[0] -%}
                {%- do state.segments.append([start, loop.index0]) -%}
            {%- else -%}
                {%- do state.segments.append([loop.index0, loop.index0]) -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {%- if state.segments | length > max_segments -%}
        {{ return(everything_from_first_new) }}
    {%- endif -%}
    {%- set order = (attempt_order('r', 0) | replace('\n', ' ')) if order_columns is none
        else 'r.' ~ order_columns | join(', r.') -%}
    {%- set row_key = 'struct(r.' ~ key_columns | join(', r.') ~ ')' -%}
    {%- set last = partitions | length - 1 -%}
    {%- for extension in range(max_extensions + 1) -%}
        {%- set open = [] -%}
        {%- for segment in state.segments if segment[1] < last -%}
            {%- do open.append(segment) -%}
        {%- endfor -%}
        {%- if not state.done and open | length == 0 -%}
            {%- set state.done = true -%}
        {%- elif not state.done -%}
            {%- set placed -%}
                case
                {%- for segment in open %}
                    when r.{{ partition_column }} between
                        {{ string_literal_list([partitions[segment[0]]]) }}
                        and {{ string_literal_list([partitions[segment[1]]]) }}
                        then {{ segment[0] }}
                {%- endfor %}
                end
            {%- endset -%}
            {%- set leak_query -%}
                with candidate_rows as (
                    select {{ row_key }} as row_key, struct({{ order }}) as row_order,
                        ({{ reset_condition }}) as is_reset, true as is_new,
                        {{ placed }} as segment_index
                    from ({{ new_rows_sql }}) as r
                    union all
                    select {{ row_key }}, struct({{ order }}), ({{ reset_condition }}), false,
                        {{ placed }}
                    from {{ relation }} as r
                    where {{ placed }} is not null
                ),
                last_new as (
                    select segment_index, row_key, max(row_order) as last_new_order
                    from candidate_rows
                    where is_new and segment_index is not null
                    group by segment_index, row_key
                )
                select last_new.segment_index
                from last_new
                left join candidate_rows as later_reset
                    on later_reset.segment_index = last_new.segment_index
                    and later_reset.row_key <=> last_new.row_key
                    and later_reset.is_reset
                    and later_reset.row_order > last_new.last_new_order
                group by last_new.segment_index, last_new.row_key
                having count(later_reset.is_reset) = 0
            {%- endset -%}
            {%- set leaking = {} -%}
            {%- for row in run_query(leak_query) -%}
                {%- do leaking.update({row[0] | int: true}) -%}
            {%- endfor -%}
            {%- if leaking | length == 0 -%}
                {%- set state.done = true -%}
            {%- elif extension == max_extensions -%}
                {%- set state.done = true -%}
                {%- for segment in state.segments if segment[0] in leaking and state.fallback is none -%}
                    {%- set state.fallback = segment[0] -%}
                {%- endfor -%}
            {%- else -%}
                {#- Take in the next partition; segments that now touch are merged. -#}
                {%- set grown = [] -%}
                {%- for segment in state.segments -%}
                    {%- set end = segment[1] + 1 if segment[0] in leaking else segment[1] -%}
                    {%- if grown and grown[-1][1] >= segment[0] - 1 -%}
                        {%- set merged = grown.pop() -%}
                        {%- do grown.append([merged[0], [merged[1], end] | max]) -%}
                    {%- else -%}
                        {%- do grown.append([segment[0], end]) -%}
                    {%- endif -%}
                {%- endfor -%}
                {%- set state.segments = grown -%}
            {%- endif -%}
        {%- endif -%}
    {%- endfor -%}
    {%- set result = [] -%}
    {%- for segment in state.segments -%}
        {%- if state.fallback is not none and segment[0] >= state.fallback -%}
            {%- if segment[0] == state.fallback -%}
                {%- do result.append([partitions[segment[0]], partitions[last]]) -%}
            {%- endif -%}
        {%- else -%}
            {%- do result.append([partitions[segment[0]], partitions[segment[1]]]) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return(result) }}
{%- endmacro %}
