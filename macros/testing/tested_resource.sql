{#-
    The node or source a generic test tests (the current test node is `model`), and the meta
    that resource sets (its `meta` and its `config.meta`, the latter winning): `{'node': ...,
    'meta': {...}}`, or none at parse time and for a test that tests neither (a singular test).
    Shared by the readers of a tested resource's meta: test_scope_filter (tests_check_latest)
    and get_where_subquery (committed_batches_only).
-#}
{% macro tested_resource() -%}
    {{ return(adapter.dispatch('tested_resource', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__tested_resource() -%}
    {%- if not execute or model is not mapping -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set tested = none -%}
    {%- if model.get('attached_node') -%}
        {%- set tested = graph.nodes.get(model.attached_node) -%}
    {%- elif model.get('sources') -%}
        {%- set matches = graph.sources.values()
            | selectattr('source_name', 'equalto', model.sources[0][0])
            | selectattr('name', 'equalto', model.sources[0][1])
            | list -%}
        {%- if matches | length > 0 -%}
            {%- set tested = matches[0] -%}
        {%- endif -%}
    {%- endif -%}
    {%- if tested is none -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set meta = {} -%}
    {%- do meta.update(tested.get('meta') or {}) -%}
    {%- do meta.update((tested.get('config') or {}).get('meta') or {}) -%}
    {{ return({'node': tested, 'meta': meta}) }}
{%- endmacro %}
