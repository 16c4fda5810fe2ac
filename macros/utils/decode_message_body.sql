{#-
    A readable preview of a Service Broker message body (base64 of the varbinary), decoded as
    seed 001 prints it, by `validation`: X = well-formed XML, stored as UTF-16LE -> text;
    E = empty -> ''; N (none, binary) or anything else -> hex of the first bytes.
    max_chars / hex_bytes default to vars body_preview_chars / body_preview_hex_bytes.
-#}
{% macro decode_message_body(body_column, validation_column, max_chars=none, hex_bytes=none) -%}
    {%- if body_column is none or validation_column is none -%}
        {{ exceptions.raise_compiler_error(
            "decode_message_body needs a body column and a validation column") }}
    {%- endif -%}
    {{ return(adapter.dispatch('decode_message_body', 'poisonwatch')(
        body_column,
        validation_column,
        max_chars if max_chars is not none else var('body_preview_chars'),
        hex_bytes if hex_bytes is not none else var('body_preview_hex_bytes')
    )) }}
{%- endmacro %}

{% macro default__decode_message_body(body_column, validation_column, max_chars, hex_bytes) -%}
    case
        when {{ validation_column }} = 'E' then ''
        when {{ body_column }} is null then null
        when {{ validation_column }} = 'X'
            then left(decode(unbase64({{ body_column }}), 'UTF-16LE'), {{ max_chars }})
        else concat('0x', upper(hex(substring(unbase64({{ body_column }}), 1, {{ hex_bytes }}))))
    end
{%- endmacro %}
