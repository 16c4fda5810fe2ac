{#-
    Creates the remediation ledgers written by `poisonwatch apply`, empty, when they
    are missing, so that the models reading them work on a fresh store. Append-only tables:
    nothing here or in `apply` needs MERGE/UPDATE/DELETE. Called from `on-run-start`.
-#}
{% macro create_ops_tables() -%}
    {{ return(adapter.dispatch('create_ops_tables', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__create_ops_tables() -%}
    {%- set ops = var('ops_database') -%}
    {%- set file_format = var('file_format') -%}
    {%- set tables = poisonwatch_ops_table_columns() -%}
    {%- if execute -%}
        {%- set existing = run_query("show databases like '" ~ ops ~ "'") -%}
        {%- if existing.rows | length == 0 -%}
            {%- do run_query('create database if not exists ' ~ ops) -%}
        {%- endif -%}
        {#- One listing instead of a `create table if not exists` per ledger on every run: on
            Delta each of those reads the table's log even when it exists. -#}
        {%- set present = [] -%}
        {%- for row in run_query('show tables in ' ~ ops) -%}
            {%- do present.append(row[1] | lower) -%}
        {%- endfor -%}
        {%- for table_name, columns in tables.items() if table_name not in present -%}
            {%- set ddl -%}
                create table if not exists {{ ops }}.{{ table_name }} (
                    {%- for column_name, column_type in columns %}
                    {{ column_name }} {{ column_type }}{{ "," if not loop.last }}
                    {%- endfor %}
                ) using {{ file_format }}
                {%- if table_name not in ('action_log', 'replay_requests', 'resume_requests', 'apply_leases') %}
                partitioned by (run_id)
                {%- endif %}
            {%- endset -%}
            {%- do run_query(ddl) -%}
        {%- endfor -%}
    {%- endif -%}
    select 1 as ops_tables_ready
{%- endmacro %}

{#- The ledgers' columns: the interface between `poisonwatch apply` and the models.
    Effect tables are partitioned by run_id (the last column): apply drops the partitions of runs
    that never reached action_log (its commit point). Keep in sync with
    python/poisonwatch/remediation/ledger.py. -#}
{% macro poisonwatch_ops_table_columns() -%}
    {{ return({
        'action_log': [
            ('action_id', 'string'),
            ('run_id', 'string'),
            ('applied_at', 'timestamp'),
            ('outcome', 'string'),
        ],
        'ended_conversations': [
            ('action_id', 'string'),
            ('server_name', 'string'),
            ('database_name', 'string'),
            ('queue_name', 'string'),
            ('conversation_handle', 'string'),
            ('ended_at', 'timestamp'),
            ('error_code', 'int'),
            ('error_description', 'string'),
            ('run_id', 'string'),
        ],
        'dead_letter_queue': [
            ('action_id', 'string'),
            ('broker_kind', 'string'),
            ('broker_name', 'string'),
            ('server_name', 'string'),
            ('database_name', 'string'),
            ('queue_name', 'string'),
            ('conversation_handle', 'string'),
            ('message_sequence_number', 'bigint'),
            ('message_id', 'string'),
            ('orig_address', 'string'),
            ('orig_queue', 'string'),
            ('message_type_name', 'string'),
            ('delivery_count', 'int'),
            ('failure_class', 'string'),
            ('reason', 'string'),
            ('body', 'string'),
            ('properties', 'string'),
            ('dead_lettered_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'disabled_consumers': [
            ('action_id', 'string'),
            ('consumer_id', 'string'),
            ('scheduled_group', 'string'),
            ('disabled_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'parked_messages': [
            ('action_id', 'string'),
            ('broker_kind', 'string'),
            ('server_name', 'string'),
            ('database_name', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('conversation_handle', 'string'),
            ('message_sequence_number', 'bigint'),
            ('message_id', 'string'),
            ('holding_queue', 'string'),
            ('body', 'string'),
            ('properties', 'string'),
            ('parked_at', 'timestamp'),
            ('due_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'discarded_messages': [
            ('action_id', 'string'),
            ('broker_kind', 'string'),
            ('server_name', 'string'),
            ('database_name', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('conversation_handle', 'string'),
            ('message_sequence_number', 'bigint'),
            ('message_id', 'string'),
            ('reason', 'string'),
            ('discarded_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'replayed_messages': [
            ('action_id', 'string'),
            ('request_id', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('message_id', 'string'),
            ('orig_address', 'string'),
            ('orig_queue', 'string'),
            ('replayed_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'failed_broker_actions': [
            ('action_id', 'string'),
            ('action_type', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('message_id', 'string'),
            ('reason', 'string'),
            ('failed_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'purged_failure_logs': [
            ('action_id', 'string'),
            ('consumer_id', 'string'),
            ('server_name', 'string'),
            ('activation_id', 'string'),
            ('purge_scope', 'string'),
            ('purge_before', 'timestamp'),
            ('purged_record_count', 'bigint'),
            ('purged_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'paused_queues': [
            ('action_id', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('consumer_id', 'string'),
            ('reason', 'string'),
            ('paused_at', 'timestamp'),
            ('run_id', 'string'),
        ],
        'replay_requests': [
            ('request_id', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('message_id', 'string'),
            ('requested_by', 'string'),
            ('requested_at', 'timestamp'),
            ('note', 'string'),
        ],
        'resume_requests': [
            ('request_id', 'string'),
            ('paused_action_id', 'string'),
            ('broker_name', 'string'),
            ('queue_name', 'string'),
            ('resumed_by', 'string'),
            ('resumed_at', 'timestamp'),
            ('is_resumed_on_broker', 'boolean'),
            ('note', 'string'),
        ],
        'apply_leases': [
            ('lease_id', 'string'),
            ('event', 'string'),
            ('host', 'string'),
            ('pid', 'int'),
            ('target', 'string'),
            ('at', 'timestamp'),
        ],
    }) }}
{%- endmacro %}
