{#-
    The `where` clause that keeps a ledger row of `poisonwatch apply` only when its run
    committed: apply appends action_log last, so effects of a run killed before that are not
    real (the next apply drops them). `effects` is the ledger's alias in the query,
    `action_log` the action_log relation (a source(), so that it stays in the staging model).
-#}
{% macro committed_effects_filter(effects, action_log) -%}
    {%- if not poisonwatch.is_identifier(effects)
        or action_log is none -%}
        {{ exceptions.raise_compiler_error(
            "committed_effects_filter expects a table alias and the action_log relation, got: "
            ~ effects ~ ", " ~ action_log) }}
    {%- endif -%}
    {{ return(adapter.dispatch('committed_effects_filter', 'poisonwatch')(effects, action_log)) }}
{%- endmacro %}

{% macro default__committed_effects_filter(effects, action_log) -%}
where exists (
    select 1 as is_committed
    from {{ action_log }} as action_log
    where
        action_log.action_id = {{ effects }}.action_id
        and action_log.run_id = {{ effects }}.run_id
)
{%- endmacro %}
