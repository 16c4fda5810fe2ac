{#-
    Artemis-style delayed redelivery (seed 002): the delay before redelivery after the
    n-th failed delivery (n = 1, 2, ...) is delay * multiplier^(n - 1), capped at max_delay.
    A null max_delay means no cap; a null delay means no delayed redelivery (null).
-#}
{% macro redelivery_delay_ms(delay_ms, multiplier, max_delay_ms, failure_number) -%}
    {{ return(adapter.dispatch('redelivery_delay_ms', 'poisonwatch')(
        delay_ms, multiplier, max_delay_ms, failure_number)) }}
{%- endmacro %}

{% macro default__redelivery_delay_ms(delay_ms, multiplier, max_delay_ms, failure_number) -%}
    cast(least(
        {{ delay_ms }} * power(coalesce({{ multiplier }}, 1.0), {{ failure_number }} - 1),
        coalesce({{ max_delay_ms }}, {{ delay_ms }} * power(coalesce({{ multiplier }}, 1.0), {{ failure_number }} - 1))
    ) as bigint)
{%- endmacro %}
