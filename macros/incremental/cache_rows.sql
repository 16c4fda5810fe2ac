{#-
    For an incremental model that reads the same new rows several times: while compiling
    (which partitions hold them, which keys, how far back to carry) and once more in its own
    query. Runs `sql` once into a temporary view held in Spark's memory, named after the model
    (cached_rows_view), and returns a query of that view, so each later read scans a few
    thousand cached rows instead of the upstream table's rewritten partitions again. The view
    lives in dbt's Spark session; the model drops it in a post-hook (`drop view if exists`,
    which also frees its cache). Only `dbt run` and `dbt build` cache: while parsing, and in
    commands that compile without running hooks (`compile`, `docs generate`, sqlfluff's
    templater), nothing runs and `sql` is returned as it is, so no view is left behind.
    `sql` must not hold a `with`: Spark (4.0) reuses a cached query holding one only where a
    statement reads it at the top, not from a subquery or under another `with`, and there
    quietly computes it again. Write it with subqueries instead.
-#}
{% macro cache_rows(relation, sql) -%}
    {%- if relation is none or sql is not string or sql | trim | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "cache_rows expects a relation and a query, got: " ~ relation ~ ", " ~ sql) }}
    {%- endif -%}
    {%- if modules.re.search(
        '(?i)(^|[\\s(])with\\s+(recursive\\s+)?[a-z_][a-z0-9_]*\\s*(\\([^)]*\\)\\s*)?as\\s*\\(', sql
    ) -%}
        {{ exceptions.raise_compiler_error(
            "cache_rows of " ~ relation ~ ": the query holds a `with`, which Spark does not "
            ~ "reuse from its cache once read from a subquery or another `with`; write it "
            ~ "with subqueries") }}
    {%- endif -%}
    {{ return(adapter.dispatch('cache_rows', 'poisonwatch')(relation, sql)) }}
{%- endmacro %}

{% macro default__cache_rows(relation, sql) -%}
    {%- if not execute or flags.WHICH not in ('run', 'build') -%}
        {{ return(sql) }}
    {%- endif -%}
    {%- set view = poisonwatch.cached_rows_view(relation) -%}
    {%- do run_query('drop view if exists ' ~ view) -%}
    {%- do run_query('cache table ' ~ view ~ ' as ' ~ sql) -%}
    {{ return('select * from ' ~ view) }}
{%- endmacro %}
