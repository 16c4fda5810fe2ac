{#-
    A pre-hook for int_receive_attempts_sequenced: on a full refresh or first build of the
    calling model (not is_incremental()), drops the tables of the incremental models tagged
    `on_demand` that read it directly. Their partitions follow its partition layout, which a
    full refresh changes (run partitions become hour partitions), and the production build
    that refreshes every other model with it leaves them out (selectors.yml): an incremental
    run of theirs afterwards would rewrite the partitions of the new layout and keep those
    of the old one, so a message would be in both. Dropped, their next on-demand build
    (`poisonwatch backtest`) starts from scratch. Found from the graph, not named, so that a
    model tagged `on_demand` later is covered too; not a `ref` (that would make each depend
    on the other). Drops them itself through the adapter (adapter.drop_relation), so that
    dbt's cache of relations knows they are gone and a later model of the same invocation
    builds them from scratch; returns '' for the hook. Nothing while parsing or on an
    incremental run.
-#}
{% macro drop_on_demand_dependents() -%}
    {{ return(adapter.dispatch('drop_on_demand_dependents', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__drop_on_demand_dependents() -%}
    {%- if not execute or is_incremental() -%}
        {{ return('') }}
    {%- endif -%}
    {%- for node in graph.nodes.values()
        if node.resource_type == 'model' and 'on_demand' in (node.tags or [])
            and node.config.materialized == 'incremental'
            and model.unique_id in node.depends_on.nodes -%}
        {%- set relation = adapter.get_relation(
            database=node.database, schema=node.schema, identifier=node.alias
        ) -%}
        {%- if relation is not none -%}
            {%- do log('drop_on_demand_dependents: ' ~ this ~ ' is built from scratch, so '
                ~ relation ~ ', partitioned like it, is dropped', info=false) -%}
            {%- do adapter.drop_relation(relation) -%}
        {%- endif -%}
    {%- endfor -%}
    {{ return('') }}
{%- endmacro %}
