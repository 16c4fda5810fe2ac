"""Keys built from attacker-chosen values cannot collide: surrogate_key (and message_key,
queue_key, the remediation action id built on it) escape each part before joining them with
`|`, rendered by real dbt and evaluated by real Spark. Values that collided under the plain
join ('a|b', 'c') and ('a', 'b|c'), null and the text '_null_', a retry's message and original
queue, a policy array's elements) give different keys; a value with no `|`, `%` or '_null_'
keeps the key the plain join gave it, so ids already stored in the ledgers stay the same."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from support.child_python import SharedChild

pytestmark = pytest.mark.slow

# Pairs that the plain join spelt alike, each pair one collision of today's keys.
COLLIDING = [
    (("a|b", "c"), ("a", "b|c")),
    ((None, "x"), ("_null_", "x")),
    (("|", ""), ("", "|")),
    (("_null_|", "y"), (None, "|y")),
]
# Pairs that an escape without escaping its own escape character would spell alike.
ESCAPED = [(("a%7Cb", "d"), ("a|b", "d")), (("%5Fnull_", "z"), ("_null_", "z"))]
PLAIN = [("orders", "ID:host-1-7:1:1:1:42"), ("SQLPROD\\PAYROLL", None), ("Очередь", "é")]

INLINE = """
select
    id,
    {{ surrogate_key(['a', 'b']) }} as new_key,
    sha2(concat_ws('|', coalesce(cast(a as string), '_null_'), coalesce(cast(b as string), '_null_')), 256) as old_key,
    {{ message_key('jms', {'broker_name': "'b1'", 'queue_name': 'a', 'message_id': 'b'}) }} as message_key,
    {{ queue_key('service_broker', {'server_name': 'a', 'database_name': 'b', 'queue_name': "'q'"}) }} as queue_key
from pw_key_parts
"""  # noqa: E501

# The remediation action id: a retry's message part (message id and original queue) and the
# policy array, each built from escaped parts.
ACTIONS = """
select
    id,
    {{ remediation_action_columns(
        ['action_type', 'broker_kind', 'statement', 'statement_language', 'is_needed',
         'message_id', 'orig_queue', 'policy_keys'],
        key_message_id="case when action_type = 'retry_from_dlq' and orig_queue is not null
            then concat(" ~ poisonwatch.key_text('message_id') ~ ", '|', "
            ~ poisonwatch.key_text('orig_queue') ~ ")
            else " ~ poisonwatch.key_text('message_id') ~ " end") }}
from pw_actions
"""

SCRIPT = """
import json, os
from support.child_dbt import compile_inline
from poisonwatch.warehouse.engine import connect
with connect("local") as e:
    for view, rows, schema in json.loads(os.environ["PW_VIEWS"]):
        e.spark.createDataFrame(rows, schema).createOrReplaceTempView(view)
    out = {}
    for name, inline in json.loads(os.environ["PW_INLINE"]).items():
        cols, rows = e.query(compile_inline(inline))
        out[name] = [dict(zip(cols, r)) for r in rows]
print("@@" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def keys(shared_store: SharedChild) -> dict[str, Any]:
    parts = [pair for collision in COLLIDING + ESCAPED for pair in collision] + PLAIN
    key_rows = [[i, "jms", a, b] for i, (a, b) in enumerate(parts)]
    action_rows = [
        # retry: message 'm|q' with queue 'r' against message 'm' with queue 'q|r'
        [0, "retry_from_dlq", "m|q", "r", ["p"]],
        [1, "retry_from_dlq", "m", "q|r", ["p"]],
        # a policy array of one element with a '|' against one of two elements
        [2, "dead_letter", "m", None, ["p|q"]],
        [3, "dead_letter", "m", None, ["p", "q"]],
        # a plain retry: the key the plain join gave it
        [4, "retry_from_dlq", "ID:1", "orders", ["max_deliveries", "5"]],
    ]
    views = [
        ["pw_key_parts", key_rows, "id int, broker_kind string, a string, b string"],
        [
            "pw_actions",
            [[*r[:1], r[1], "jms", "s", "json", True, *r[2:]] for r in action_rows],
            "id int, action_type string, broker_kind string, statement string, "
            "statement_language string, is_needed boolean, message_id string, "
            "orig_queue string, policy_keys array<string>",
        ],
    ]
    return shared_store.run(
        SCRIPT,
        {
            "PW_VIEWS": json.dumps(views),
            "PW_INLINE": json.dumps({"keys": INLINE, "actions": ACTIONS}),
        },
    )


def test_values_that_collided_give_different_keys(keys: dict[str, Any]) -> None:
    rows = {r["id"]: r for r in keys["keys"]}
    for n, pairs in enumerate(COLLIDING + ESCAPED):
        first, second = rows[2 * n], rows[2 * n + 1]
        if n < len(COLLIDING):
            assert first["old_key"] == second["old_key"], ("the plain join spelt them alike", pairs)
        for key in ("new_key", "message_key", "queue_key"):
            assert first[key] != second[key], (key, pairs)
    assert len({r["new_key"] for r in rows.values()}) == len(rows)


def test_plain_values_keep_their_stored_keys(keys: dict[str, Any]) -> None:
    plain = [r for r in keys["keys"] if r["id"] >= 2 * len(COLLIDING + ESCAPED)]
    assert len(plain) == len(PLAIN)
    for row in plain:
        assert row["new_key"] == row["old_key"]


def test_action_ids_of_colliding_retries_and_policies_differ(keys: dict[str, Any]) -> None:
    ids = {r["id"]: r["action_id"] for r in keys["actions"]}
    assert ids[0] != ids[1]  # ('m|q', 'r') against ('m', 'q|r')
    assert ids[2] != ids[3]  # ['p|q'] against ['p', 'q']
    # A plain retry keeps the id the plain join gave it (the part order of the action key).
    old = "|".join(
        [
            "retry_from_dlq",
            "jms",
            *["_null_"] * 6,
            "ID:1|orders",
            *["_null_"] * 4,
            "max_deliveries|5",
        ]
    )
    assert ids[4] == hashlib.sha256(old.encode()).hexdigest()
