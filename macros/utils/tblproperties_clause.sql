{#-
    dbt-spark's `tblproperties (...)` of `create table ... as select`, with, on Delta, an
    enforced contract's check constraints as `delta.constraints.<name>` properties: Delta then
    checks every row while writing the table, in its one commit, where dbt-spark adds each
    constraint afterwards with an `alter table` (a commit and a scan each; spark__persist_constraints
    adds none). Keys and values are quoted as string literals.
-#}
{% macro spark__tblproperties_clause() -%}
    {%- set properties = {} -%}
    {%- do properties.update(config.get('tblproperties') or {}) -%}
    {%- set contract = config.get('contract') -%}
    {%- if contract and contract.enforced and config.get('file_format') == 'delta' -%}
        {%- for constraint in model.constraints if constraint.type == 'check' -%}
            {%- if not constraint.name -%}
                {{ exceptions.raise_compiler_error(
                    "model " ~ model.name ~ ": a check constraint needs a name (Delta reports"
                    ~ " a broken row by it): " ~ constraint.expression) }}
            {%- endif -%}
            {%- do properties.update(
                {'delta.constraints.' ~ constraint.name | lower: constraint.expression}) -%}
        {%- endfor -%}
    {%- endif -%}
    {%- if properties | length > 0 %}
    tblproperties (
        {%- for key, value in properties.items() %}
        {{ poisonwatch.string_literal_list([key]) }} = {{ poisonwatch.string_literal_list([value]) }}
        {%- if not loop.last %},{% endif -%}
        {%- endfor %}
    )
    {%- endif -%}
{%- endmacro %}
