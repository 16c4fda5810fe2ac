{#-
    The select list every remediation action family emits (models/marts/remediation):
    the 30 columns of the action contract, in order, that remediation_actions unions —
    action_id, then 29 typed columns. The contract is spelt here once. `provided` names the
    columns the family's CTE has; each is cast to its contract type, every other column is a
    typed null (collateral_message_count: 0). `action_id` is the deterministic key (sha2 of
    type, target keys and policy): the key columns are taken as typed, `policy_keys` (a
    provided array<string> column) names the policy that asked for the action, and
    `key_message_id` replaces message_id in the key (a DLQ holds one copy per queue a
    multicast message was routed to, all with one JMSMessageID: a retry is keyed by message
    id and original queue); it is a part built from key_text parts, not escaped again.
-#}
{% macro remediation_action_columns(provided, key_message_id=none) -%}
    {%- if provided is string or provided is mapping or provided | length == 0 -%}
        {{ exceptions.raise_compiler_error(
            "remediation_action_columns: provided must be a non-empty list of column names") }}
    {%- endif -%}
    {%- if 'policy_keys' not in provided -%}
        {{ exceptions.raise_compiler_error(
            "remediation_action_columns: provided must name policy_keys (the key's policy part)") }}
    {%- endif -%}
    {{ return(adapter.dispatch('remediation_action_columns', 'poisonwatch')(
        provided, key_message_id)) }}
{%- endmacro %}

{% macro default__remediation_action_columns(provided, key_message_id) -%}
    {#- (name, type, value when the family does not provide it) -#}
    {%- set contract = [
        ('action_type', 'string', 'null'),
        ('broker_kind', 'string', 'null'),
        ('server_name', 'string', 'null'),
        ('database_name', 'string', 'null'),
        ('broker_name', 'string', 'null'),
        ('queue_name', 'string', 'null'),
        ('conversation_handle', 'string', 'null'),
        ('message_sequence_number', 'bigint', 'null'),
        ('message_id', 'string', 'null'),
        ('orig_address', 'string', 'null'),
        ('orig_queue', 'string', 'null'),
        ('consumer_id', 'string', 'null'),
        ('scheduled_group', 'string', 'null'),
        ('reason', 'string', 'null'),
        ('policy_name', 'string', 'null'),
        ('statement', 'string', 'null'),
        ('statement_language', 'string', 'null'),
        ('error_code', 'int', 'null'),
        ('error_description', 'string', 'null'),
        ('park_delay_minutes', 'int', 'null'),
        ('due_at', 'timestamp', 'null'),
        ('is_needed', 'boolean', 'null'),
        ('invalid_reason', 'string', 'null'),
        ('request_id', 'string', 'null'),
        ('activation_id', 'string', 'null'),
        ('purge_scope', 'string', 'null'),
        ('purge_before', 'timestamp', 'null'),
        ('purge_record_count', 'bigint', 'null'),
        ('collateral_message_count', 'bigint', '0'),
    ] -%}
    {%- set required = ['action_type', 'broker_kind', 'statement', 'statement_language', 'is_needed'] -%}
    {%- set names = contract | map(attribute=0) | list -%}
    {%- for name in provided -%}
        {%- if name not in names and name != 'policy_keys' -%}
            {{ exceptions.raise_compiler_error(
                "remediation_action_columns: '" ~ name ~ "' is not a contract column ("
                ~ names | join(', ') ~ ")") }}
        {%- endif -%}
    {%- endfor -%}
    {%- for name in required if name not in provided -%}
        {{ exceptions.raise_compiler_error(
            "remediation_action_columns: every family provides " ~ required | join(', ')
            ~ "; missing " ~ name) }}
    {%- endfor -%}
    {%- set typed = {} -%}
    {%- for name, type, absent in contract -%}
        {%- do typed.update({
            name: 'cast(' ~ (name if name in provided else absent) ~ ' as ' ~ type ~ ')'
        }) -%}
    {%- endfor -%}
    {%- set key_message = {'encoded': key_message_id} if key_message_id is not none
        else typed['message_id'] -%}
    {{ poisonwatch.surrogate_key([
        typed['action_type'], typed['broker_kind'], typed['server_name'],
        typed['database_name'], typed['broker_name'], typed['queue_name'],
        typed['conversation_handle'], typed['message_sequence_number'], key_message,
        typed['consumer_id'], typed['activation_id'], typed['purge_scope'],
        typed['purge_before'],
        {'encoded': "concat_ws('|', transform(cast(policy_keys as array<string>), k -> coalesce("
            ~ poisonwatch.key_text('k') ~ ", '_null_')))"},
    ]) }} as action_id
    {%- for name, type, absent in contract %},
    {{ typed[name] }} as {{ name }}
    {%- endfor %}
{%- endmacro %}
