{#-
    dbt-spark's constraints after a table is written, less the check constraints, which
    spark__tblproperties_clause put into the table's create statement; a column's not_null
    is still set here.
-#}
{% macro spark__persist_constraints(relation, model) -%}
    {%- set contract = config.get('contract') -%}
    {%- if contract.enforced and config.get('file_format', 'delta') == 'delta' -%}
        {%- do alter_column_set_constraints(relation, model.columns) -%}
    {%- endif -%}
{%- endmacro %}
