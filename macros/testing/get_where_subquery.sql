{#-
    dbt's own get_where_subquery, overridden as dbt's `where` documentation describes ("Custom
    logic"): a generic test reads the tested relation through this subquery. Besides the
    test's `where` config, it applies the tested resource's scope (test_scope_filter), so that
    the tests of a table that grows with history check what the latest build added.
-#}
{% macro get_where_subquery(relation) -%}
    {%- set conditions = [] -%}
    {%- set where = config.get('where', '') -%}
    {%- if where -%}
        {%- do conditions.append('(' ~ where ~ ')') -%}
    {%- endif -%}
    {%- set committed = poisonwatch.committed_batches_scope() -%}
    {%- if committed -%}
        {%- do conditions.append('(' ~ committed ~ ')') -%}
    {%- endif -%}
    {%- set scope = test_scope_filter(relation) -%}
    {%- if scope -%}
        {%- do conditions.append('(' ~ scope ~ ')') -%}
    {%- endif -%}
    {%- if conditions | length > 0 -%}
        {%- set filtered -%}
            (select * from {{ relation }} where {{ conditions | join(' and ') }}) dbt_subquery
        {%- endset -%}
        {%- do return(filtered) -%}
    {%- else -%}
        {%- do return(relation) -%}
    {%- endif -%}
{%- endmacro %}
