{#-
    For message_key and queue_key: the identity's column list of one broker kind, with the
    parts named in `columns` replaced by their expressions. Fails on an unknown broker kind or
    a part the identity does not have, so a typo cannot silently change a key.
-#}
{% macro identity_columns(key_name, identity, broker_kind, columns=none) -%}
    {%- if broker_kind not in identity -%}
        {{ exceptions.raise_compiler_error(
            key_name ~ " expects broker_kind 'service_broker' or 'jms', got: " ~ broker_kind) }}
    {%- endif -%}
    {%- set parts = identity[broker_kind] -%}
    {%- set overrides = columns or {} -%}
    {%- if overrides is not mapping -%}
        {{ exceptions.raise_compiler_error(
            key_name ~ " expects columns as a mapping of part to expression, got: " ~ overrides) }}
    {%- endif -%}
    {%- for part in overrides if part not in parts -%}
        {{ exceptions.raise_compiler_error(
            key_name ~ " of " ~ broker_kind ~ " has no part " ~ part ~ "; its parts are: "
            ~ parts | join(', ')) }}
    {%- endfor -%}
    {%- set result = [] -%}
    {%- for part in parts -%}
        {%- do result.append(overrides.get(part, part)) -%}
    {%- endfor -%}
    {{ return(result) }}
{%- endmacro %}
