{#-
    Whether a server reports (its fuse trips there, rules.md "Circuit breakers"): its
    same-type run reached N = breaker_same_type_threshold(M) or its any-type run reached M.
    consumer_circuit_breakers applies it to each server's longest runs, breaker_backtest to
    each failure of a run with each candidate's M.
-#}
{% macro breaker_server_reports(same_type_run, any_type_run, max_consecutive_failures) -%}
    {%- for value in [same_type_run, any_type_run, max_consecutive_failures] -%}
        {%- if value is not string or value | trim | length == 0 -%}
            {{ exceptions.raise_compiler_error(
                "breaker_server_reports expects three column names or SQL expressions, got: "
                ~ value) }}
        {%- endif -%}
    {%- endfor -%}
    {{ return(adapter.dispatch('breaker_server_reports', 'poisonwatch')(
        same_type_run, any_type_run, max_consecutive_failures)) }}
{%- endmacro %}

{% macro default__breaker_server_reports(same_type_run, any_type_run, max_consecutive_failures) -%}
    (
        {{ same_type_run }} >= {{ breaker_same_type_threshold(max_consecutive_failures) }}
        or {{ any_type_run }} >= {{ max_consecutive_failures }}
    )
{%- endmacro %}
