{#-
    The time bucket (time_bucket) of the earliest `attempted_at` of a relation's rows matching
    `where_clause`, read at run time: the cutoff from which an incremental model recomputes.
    None while parsing or when no row matches.
-#}
{% macro earliest_time_bucket(relation, where_clause, seconds) -%}
    {%- if relation is none or where_clause is not string -%}
        {{ exceptions.raise_compiler_error(
            "earliest_time_bucket expects a relation and a where clause, got: "
            ~ relation ~ ", " ~ where_clause) }}
    {%- endif -%}
    {{ return(adapter.dispatch('earliest_time_bucket', 'poisonwatch')(
        relation, where_clause, seconds)) }}
{%- endmacro %}

{% macro default__earliest_time_bucket(relation, where_clause, seconds) -%}
    {%- if not execute -%}
        {{ return(none) }}
    {%- endif -%}
    {%- set query -%}
        select {{ time_bucket('min(attempted_at)', seconds) }} from {{ relation }} {{ where_clause }}
    {%- endset -%}
    {{ return(run_query(query).columns[0].values()[0]) }}
{%- endmacro %}
