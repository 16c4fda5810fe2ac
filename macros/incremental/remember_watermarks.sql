{#-
    For a model that reads, before its statement, how far its inputs reach (`values`: a dict
    of watermark name to text, or none where an input holds nothing yet): keeps them in the
    invocation's graph for its post-hook record_remembered_watermarks, which writes them on the
    table only after the statement succeeded. The values are read before the statement, not
    in the hook: rows that arrive while the statement runs are then taken again by the next
    run instead of being counted as taken by this one. Names are identifiers; the hook writes
    `poisonwatch.watermark.<name>`. Nothing while parsing.
-#}
{% macro remember_watermarks(values) -%}
    {%- if values is not mapping or values | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "remember_watermarks expects a non-empty dict of name to text, got: " ~ values) }}
    {%- endif -%}
    {%- for name, value in values.items() -%}
        {%- if not poisonwatch.is_identifier(name)
            or not (value is none or value is string) -%}
            {{ exceptions.raise_compiler_error(
                "remember_watermarks expects identifiers and text or none, got: "
                ~ name ~ ": " ~ value) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(adapter.dispatch('remember_watermarks', 'poisonwatch')(values)) }}
{%- endmacro %}

{% macro default__remember_watermarks(values) -%}
    {%- if not execute or graph is not mapping -%}
        {{ return(none) }}
    {%- endif -%}
    {%- do graph.setdefault('poisonwatch_remembered_watermarks', {}).update(
        {this | string: values}) -%}
{%- endmacro %}
