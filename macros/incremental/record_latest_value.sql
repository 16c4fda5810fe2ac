{#-
    The hooks that leave on an incremental model's table the newest value of one of its
    columns (int_receive_attempts_sequenced: `sequenced_at`, the run that wrote a partition),
    for recorded_latest_value to read back on the next run. With it the next run knows that
    the partitions it rewrites are the only ones newer than that value, and tells
    changed_partitions_filter so, instead of every model downstream scanning the column.
    `state` 'pending' is the pre-hook: on an incremental run whose compiling remembered the
    value it writes (remember_latest_value), that value as `poisonwatch.latest.<column>.pending`.
    'committed' is the post-hook: the same value as `poisonwatch.latest.<column>` and as
    pending; after a full refresh or first run, the newest value read from the table it just
    wrote (one scan of the column in a full build). An incremental run that writes nothing changes neither, and
    a run stopped between the two leaves them unequal: the next run then does not trust them.
    Nothing while parsing, and nothing when the table holds no value.
-#}
{% macro record_latest_value(column, state) -%}
    {%- if not poisonwatch.is_identifier(column) or state not in ('pending', 'committed') -%}
        {{ exceptions.raise_compiler_error(
            "record_latest_value expects one column name and 'pending' or 'committed', got: "
            ~ column ~ ", " ~ state) }}
    {%- endif -%}
    {{ return(adapter.dispatch('record_latest_value', 'poisonwatch')(column, state)) }}
{%- endmacro %}

{% macro default__record_latest_value(column, state) -%}
    {%- if not execute or graph is not mapping -%}
        {{ return('') }}
    {%- endif -%}
    {%- set remembered = graph.get('poisonwatch_latest_values', {}).get(
        this ~ '|' ~ column ~ '|') -%}
    {%- if is_incremental() -%}
        {#- Only a run that writes remembered its value while compiling. -#}
        {%- set newest = remembered.value if remembered is mapping else none -%}
    {%- elif state == 'committed' -%}
        {#- (latest_value would not see the table yet: dbt's relation cache learns of it
            after the hooks.) -#}
        {%- set newest = run_query(
            'select cast(max(' ~ column ~ ') as string) from ' ~ this
        ).columns[0].values()[0] -%}
    {%- else -%}
        {%- set newest = none -%}
    {%- endif -%}
    {%- if newest is none -%}
        {{ return('') }}
    {%- endif -%}
    {%- set key = 'poisonwatch.latest.' ~ column -%}
    {%- set properties = {key ~ '.pending': newest} -%}
    {%- if state == 'committed' -%}
        {%- do properties.update({key: newest}) -%}
    {%- endif -%}
    {{ poisonwatch.set_table_properties(this, properties) }}
{%- endmacro %}
