{#-
    The `message_partition` of a message seen for the first time: the time bucket of its
    first attempt (time_bucket), then ' open' when none of its attempts so far settles it
    (`is_settled` false: no committed or acknowledged receive, no conversation end), then,
    on an incremental run, ' r' and the run's `generation` (yyyyMMddTHHmmss: the start of
    the time bucket holding the run's start). Later landings touch mostly the messages still
    being retried, so keeping them apart from the settled ones lets a run rewrite a small
    partition instead of an hour; and new messages go to partitions of the run's hour, so a
    run does not rewrite an hour an earlier hour's run filled just to add the messages first
    seen in it (the newest hour, or an old one in a late file). Runs within one hour share
    those partitions: frequent runs do not multiply them.
-#}
{% macro new_message_partition(first_attempted_at, is_settled, seconds, generation=none) -%}
    {%- if first_attempted_at is not string or is_settled is not string
        or first_attempted_at | length == 0 or is_settled | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "new_message_partition expects two SQL expressions, got: "
            ~ first_attempted_at ~ ", " ~ is_settled) }}
    {%- endif -%}
    {%- if generation is not none and not modules.re.fullmatch('[0-9]{8}T[0-9]{6}', generation) -%}
        {{ exceptions.raise_compiler_error(
            "new_message_partition expects a generation like 20260301T000000, got: "
            ~ generation) }}
    {%- endif -%}
    {{ return(adapter.dispatch('new_message_partition', 'poisonwatch')(
        first_attempted_at, is_settled, seconds, generation)) }}
{%- endmacro %}

{% macro default__new_message_partition(first_attempted_at, is_settled, seconds, generation) -%}
    concat(
        {{ time_bucket(first_attempted_at, seconds) }},
        case when {{ is_settled }} then '' else ' open' end
        {%- if generation is not none %},
        ' r{{ generation }}'
        {%- endif %}
    )
{%- endmacro %}
