{#-
    How many buckets a full refresh of int_receive_attempts_sequenced creates: one per
    `attempts_per_bucket` receive attempts landed so far (the ledger's loaded records of both
    attempt datasets), at least one and at most `max_buckets`. Each bucket is a file in every
    partition it has rows in, and on a small store that costs more than the shuffle it saves.
    While parsing (no store to read), `max_buckets`.
    The count is part of the table: an incremental run appends to the buckets it has, so it
    changes only with a full refresh.
    The ledger is found through the graph (source ingest.ingested_files), not ref() or
    source(): a DAG edge from the ledger would put the sequenced attempts and all after them
    downstream of every ingest (`poisonwatch build` selects `source:ingest+`), snapshots-only
    ones included.
-#}
{% macro message_bucket_count(max_buckets, attempts_per_bucket, ledger=none) -%}
    {%- if max_buckets is not integer or max_buckets < 1
        or attempts_per_bucket is not integer or attempts_per_bucket < 1 -%}
        {{ exceptions.raise_compiler_error(
            "message_bucket_count expects two positive integers, got: "
            ~ max_buckets ~ ", " ~ attempts_per_bucket) }}
    {%- endif -%}
    {{ return(adapter.dispatch('message_bucket_count', 'poisonwatch')(
        max_buckets, attempts_per_bucket, ledger)) }}
{%- endmacro %}

{% macro default__message_bucket_count(max_buckets, attempts_per_bucket, ledger) -%}
    {%- if not execute -%}
        {{ return(max_buckets) }}
    {%- endif -%}
    {%- if ledger is none -%}
        {%- set found = graph.sources.values()
            | selectattr('source_name', 'equalto', 'ingest')
            | selectattr('name', 'equalto', 'ingested_files')
            | list -%}
        {%- if found | length == 0 -%}
            {{ exceptions.raise_compiler_error(
                "message_bucket_count: source ingest.ingested_files is not defined") }}
        {%- endif -%}
        {%- set ledger = api.Relation.create(
            database=found[0].database, schema=found[0].schema,
            identifier=found[0].identifier) -%}
    {%- endif -%}
    {%- set landed = run_query(
        'select coalesce(sum(loaded_records), 0) from ' ~ ledger
        ~ " where dataset in ('ssb_receive_attempts', 'jms_receive_attempts')"
    ).columns[0].values()[0] | int -%}
    {%- set wanted = (landed + attempts_per_bucket - 1) // attempts_per_bucket -%}
    {{ return([1, [max_buckets, wanted] | min] | max) }}
{%- endmacro %}
