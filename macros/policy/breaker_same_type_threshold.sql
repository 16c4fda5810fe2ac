{#-
    N of the circuit breaker (seed 002, rules.md "Circuit breakers"): floor(M / 3), M being
    the consumer's max_consecutive_failures. Used by consumer_circuit_breakers and
    breaker_backtest.
-#}
{% macro breaker_same_type_threshold(max_consecutive_failures) -%}
    {%- if max_consecutive_failures is not string
        or max_consecutive_failures | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "breaker_same_type_threshold expects a column name or SQL expression, got: "
            ~ max_consecutive_failures) }}
    {%- endif -%}
    {{ return(adapter.dispatch('breaker_same_type_threshold', 'poisonwatch')(
        max_consecutive_failures)) }}
{%- endmacro %}

{% macro default__breaker_same_type_threshold(max_consecutive_failures) -%}
    cast(floor({{ max_consecutive_failures }} / 3) as int)
{%- endmacro %}
