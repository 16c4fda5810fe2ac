{#-
    The partition names of a table partitioned by one time-bucket column (time_bucket text),
    oldest first, read from the metastore (`show partitions`, no data read), or on Delta,
    which keeps partitions in its log, with a distinct query on the column; none when the
    table has another partition column or a name that is not a time bucket, so the caller
    falls back to reading every partition.
-#}
{% macro time_bucket_partitions(relation, partition_column) -%}
    {%- if relation is none or partition_column is not string -%}
        {{ exceptions.raise_compiler_error(
            "time_bucket_partitions expects a relation and a partition column, got: "
            ~ relation ~ ", " ~ partition_column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('time_bucket_partitions', 'poisonwatch')(
        relation, partition_column)) }}
{%- endmacro %}

{% macro default__time_bucket_partitions(relation, partition_column) -%}
    {%- set bucket = modules.re.compile('^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d$') -%}
    {%- set state = namespace(usable=true) -%}
    {%- set names = [] -%}
    {%- if var('file_format') == 'delta' -%}
        {%- set listing = "select distinct concat('" ~ partition_column ~ "=', cast("
            ~ adapter.quote(partition_column) ~ ' as string)) from ' ~ relation -%}
    {%- else -%}
        {%- set listing = 'show partitions ' ~ relation -%}
    {%- endif -%}
    {%- for row in run_query(listing) -%}
        {#- Hive escapes ':' in partition names; a time bucket has nothing else to escape. -#}
        {%- set spec = (row[0] | string).split('=', 1) -%}
        {%- set value = (spec[1] if spec | length == 2 else '') | replace('%3A', ':') -%}
        {%- if spec[0] != partition_column or not bucket.match(value) -%}
            {%- set state.usable = false -%}
        {%- endif -%}
        {%- do names.append(value) -%}
    {%- endfor -%}
    {{ return(names | sort if state.usable else none) }}
{%- endmacro %}
