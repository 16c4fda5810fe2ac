{#-
    The stamp (a timestamp column written with the run that wrote the row: `sequenced_at`,
    `rewritten_at`) after which an incremental model has not yet read its upstream's rows.
    `poisonwatch build` passes the stamp of the last build it recorded in
    POISONWATCH_CHANGED_SINCE, for a build of what is downstream of new input (a literal, so
    file statistics skip the files no later run wrote); without it, the newest stamp of the
    model's own rows (dbt's usual incremental bound, which may be older than needed, never
    newer, when the model's last runs added no rows).
    Call it only under is_incremental(): it reads `this`.
-#}
{% macro changed_since_bound(column) -%}
    {%- if not poisonwatch.is_identifier(column) -%}
        {{ exceptions.raise_compiler_error(
            "changed_since_bound expects one column name, got: " ~ column) }}
    {%- endif -%}
    {{ return(adapter.dispatch('changed_since_bound', 'poisonwatch')(column)) }}
{%- endmacro %}

{% macro default__changed_since_bound(column) -%}
    {%- set since = env_var('POISONWATCH_CHANGED_SINCE', '') -%}
    {%- if since -%}
        {%- if not modules.re.fullmatch('\\d{4}-\\d{2}-\\d{2} \\d{2}:\\d{2}:\\d{2}', since) -%}
            {{ exceptions.raise_compiler_error(
                "POISONWATCH_CHANGED_SINCE must be 'yyyy-MM-dd HH:mm:ss', got: " ~ since) }}
        {%- endif -%}
        timestamp '{{ since }}'
    {%- else -%}
        (select coalesce(max({{ column }}), timestamp '0001-01-01') from {{ this }})
    {%- endif -%}
{%- endmacro %}
