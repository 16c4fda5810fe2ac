{#-
    A post-hook: writes on the model's table the watermarks its compiling read ahead of its
    statement (remember_watermarks), as table properties `poisonwatch.watermark.<name>`, for
    recorded_watermark (timestamps) or table_properties to read back on the next run. Names
    whose value is none (an input that holds nothing yet) are left as they are. Nothing while
    parsing or when nothing was remembered.
-#}
{% macro record_remembered_watermarks() -%}
    {{ return(adapter.dispatch('record_remembered_watermarks', 'poisonwatch')()) }}
{%- endmacro %}

{% macro default__record_remembered_watermarks() -%}
    {%- if not execute or graph is not mapping -%}
        {{ return('') }}
    {%- endif -%}
    {%- set values = graph.get('poisonwatch_remembered_watermarks', {}).get(this | string) -%}
    {%- set properties = {} -%}
    {%- for name, value in (values or {}).items() if value is not none -%}
        {%- do properties.update({'poisonwatch.watermark.' ~ name: value}) -%}
    {%- endfor -%}
    {%- if properties | length == 0 -%}
        {{ return('') }}
    {%- endif -%}
    {{ poisonwatch.set_table_properties(this, properties) }}
{%- endmacro %}
