{#-
    The select list every alert family emits (models/marts/alerting): the alert contract,
    spelt here once. The subject and measure columns are shared by both grains; `grain` adds
    its time columns: 'point' (one evaluation of a rule at a point in data time: point_at,
    is_firing; unioned by int_alerts__queue_episodes) or 'alert' (one alert: first_seen_at,
    last_seen_at, status; unioned by the mart alerts). `provided` names the columns the
    family's CTE has; each is cast to its contract type, every other column is a typed null.
-#}
{% macro alert_columns(provided, grain) -%}
    {%- if provided is string or provided is mapping or provided | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "alert_columns: provided must be a non-empty list of column names") }}
    {%- endif -%}
    {%- if grain not in ['point', 'alert'] -%}
        {{ exceptions.raise_compiler_error(
            "alert_columns: grain must be 'point' or 'alert', got: " ~ grain) }}
    {%- endif -%}
    {{ return(adapter.dispatch('alert_columns', 'poisonwatch')(provided, grain)) }}
{%- endmacro %}

{% macro default__alert_columns(provided, grain) -%}
    {#- (name, type, grain: both | point | alert), in contract order -#}
    {%- set contract = [
        ('alert_kind', 'string', 'both'),
        ('severity', 'string', 'both'),
        ('broker_kind', 'string', 'both'),
        ('server_name', 'string', 'both'),
        ('database_name', 'string', 'both'),
        ('broker_name', 'string', 'both'),
        ('queue_name', 'string', 'both'),
        ('consumer_id', 'string', 'both'),
        ('failure_group_id', 'string', 'both'),
        ('point_at', 'timestamp', 'point'),
        ('is_firing', 'boolean', 'point'),
        ('first_seen_at', 'timestamp', 'alert'),
        ('last_seen_at', 'timestamp', 'alert'),
        ('status', 'string', 'alert'),
        ('observed_value', 'double', 'both'),
        ('baseline_value', 'double', 'both'),
        ('threshold', 'double', 'both'),
        ('detail', 'string', 'both'),
        ('resolved_retention_hours', 'int', 'both'),
    ] -%}
    {%- set required = {
        'point': ['alert_kind', 'severity', 'broker_kind', 'point_at', 'is_firing', 'threshold',
            'resolved_retention_hours'],
        'alert': ['alert_kind', 'severity', 'broker_kind', 'first_seen_at', 'status', 'threshold',
            'resolved_retention_hours'],
    }[grain] -%}
    {%- set columns = contract | selectattr(2, 'in', ['both', grain]) | list -%}
    {%- set names = columns | map(attribute=0) | list -%}
    {%- for name in provided if name not in names -%}
        {{ exceptions.raise_compiler_error(
            "alert_columns: '" ~ name ~ "' is not a column of the " ~ grain ~ " contract ("
            ~ names | join(', ') ~ ")") }}
    {%- endfor -%}
    {%- for name in required if name not in provided -%}
        {{ exceptions.raise_compiler_error(
            "alert_columns: every " ~ grain ~ " family provides " ~ required | join(', ')
            ~ "; missing " ~ name) }}
    {%- endfor -%}
    {%- for name, type, _ in columns %}
    cast({{ name if name in provided else 'null' }} as {{ type }}) as {{ name }}
    {%- if not loop.last %},{% endif %}
    {%- endfor %}
{%- endmacro %}
