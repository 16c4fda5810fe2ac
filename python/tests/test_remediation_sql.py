"""Hostile values give valid, escaped T-SQL: the remediation macros, rendered by real dbt and
evaluated by real Spark over hostile rows, then assembled into a DBA script and parsed with
sqlfluff's tsql dialect. The hostile text may only appear inside string literals or quoted
identifiers; an invalid handle gives no statement at all."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from child_python import SharedChild

from poisonwatch.remediation.plan import render_script

pytestmark = pytest.mark.slow

DROP = "'; DROP TABLE x;--"
GUID = "e29059bb-9922-40f4-a575-66b2e4c70cf9"
DESCRIPTION = "it's " + DROP + ' ☃ "q" \\ ' + "ы" * 5000
HOSTILE = {
    "database_name": "Ad]" + DROP + "é",
    "queue_name": "dbo.Q']" + DROP + "☃",
    "message_id": "ID:it's" + DROP + ' "q" \\ ☃',
    "broker_name": 'b"1' + DROP,
    "address": "orders" + DROP,
    "consumer_id": "agent.o" + DROP,
    "orig_queue": "orders.o'q" + DROP,
}

INLINE = """
select
    handle,
    {{ end_conversation_statement('database_name', 'handle', 'error_code', 'error_description') }} as end_conversation,
    {{ re_enable_queue_statement('database_name', 'queue_name') }} as re_enable_queue,
    {{ inspect_message_statement('database_name', 'queue_name', 'handle') }} as inspect_message,
    {{ receive_message_statement('database_name', 'queue_name', 'handle', 'seq') }} as discard,
    {{ receive_message_statement('database_name', 'queue_name', 'handle', 'seq', target_table='dbo.Parked', delay_minutes='delay') }} as park,
    {{ artemis_command('broker_name', 'address', 'queue_name', 'sendMessagesToDeadLetterAddress(java.lang.String)', [jms_message_filter('message_id')]) }} as dead_letter,
    {{ artemis_command('broker_name', "'DLQ'", "'DLQ'", 'moveMessages(java.lang.String,java.lang.String)', [jms_message_filter('message_id', 'orig_queue'), 'orig_queue']) }} as retry_from_dlq,
    {{ agent_command('disable_consumer', {'consumer_id': 'consumer_id', 'scheduled_group': 'database_name'}) }} as disable_consumer
from pw_hostile
"""  # noqa: E501

SCRIPT = """
import json, os
from child_dbt import compile_inline
from poisonwatch.warehouse.engine import connect
rows = json.loads(os.environ["PW_ROWS"])
with connect("local") as e:
    df = e.spark.createDataFrame(rows)
    df.createOrReplaceTempView("pw_hostile")
    cols, out = e.query(compile_inline(os.environ["PW_INLINE"]))
print("@@" + json.dumps({"columns": cols, "rows": [list(r) for r in out]}))
"""


@pytest.fixture(scope="module")
def rendered(shared_store: SharedChild) -> list[dict[str, Any]]:
    base = {
        **HOSTILE,
        "error_code": 500,
        "error_description": DESCRIPTION,
        "seq": 7,
        "delay": 60,
    }
    rows = [
        {**base, "handle": GUID},
        {**base, "handle": DROP},
        {**base, "handle": GUID.upper() + "\n"},
        {**base, "handle": "A0000000-0000-4000-8000-00000000000A", "error_code": -1},
    ]
    data = shared_store.run(SCRIPT, {"PW_ROWS": json.dumps(rows), "PW_INLINE": INLINE})
    by_handle = {r[0]: dict(zip(data["columns"], r, strict=True)) for r in data["rows"]}
    return [by_handle[r["handle"]] for r in rows]


SB_TYPES = ("end_conversation", "re_enable_queue", "inspect_message", "discard", "park")


def _unquote(literal: str) -> str:
    assert literal.startswith("N'") and literal.endswith("'"), literal[:40]
    body = literal[2:-1]
    assert re.fullmatch(r"(?:[^']|'')*", body, re.S), "an undoubled quote inside a literal"
    return body.replace("''", "'")


def test_invalid_handles_give_no_statement(rendered: list[dict[str, Any]]) -> None:
    valid, injected, trailing_newline, bad_code = rendered
    for action in ("end_conversation", "inspect_message", "discard", "park"):
        assert valid[action] is not None
        assert injected[action] is None, action
        assert trailing_newline[action] is None, action
    assert bad_code["end_conversation"] is None
    # Queue-level statements do not depend on the handle.
    assert injected["re_enable_queue"] == valid["re_enable_queue"]


def test_script_parses_and_hostile_text_stays_quoted(rendered: list[dict[str, Any]]) -> None:
    from sqlfluff.core import Linter

    valid = rendered[0]
    actions = [
        {
            "action_id": f"{n:064x}",
            "action_type": t,
            "statement_language": "tsql",
            "statement": valid[t],
            "sequence_in_script": n,
            "server_name": "SQL'1" + DROP,
            "reason": "threshold_exceeded",
            "policy_name": "policy" + DROP,
            "collateral_message_count": 2,
        }
        for n, t in enumerate(SB_TYPES, start=1)
    ]
    script = render_script(actions, "hostile values")
    assert script.count("DROP TABLE") >= len(SB_TYPES)  # the hostile text is there ...
    parsed = Linter(dialect="tsql").parse_string(script)
    assert not parsed.violations, [str(v) for v in parsed.violations][:3]
    assert parsed.tree is not None
    assert not list(parsed.tree.recursive_crawl("unparsable"))
    # ... but only inside string literals and bracket-quoted identifiers.
    outside = [
        seg.raw
        for seg in parsed.tree.raw_segments
        if "DROP TABLE" in seg.raw and not seg.is_type("quoted_literal", "quoted_identifier")
    ]
    assert outside == []
    batches = [b for b in script.split("\nGO\n") if b.strip()]
    assert len(batches) == len(SB_TYPES) + 1  # + the server guard


def test_values_survive_quoting_exactly(rendered: list[dict[str, Any]]) -> None:
    valid = rendered[0]
    end = valid["end_conversation"]
    # The description is a parameter, quotes doubled, cut to Service Broker's 3000 characters.
    desc = re.search(r"@error_description = (N'(?:[^']|'')*')", end, re.S)
    assert desc is not None
    assert _unquote(desc.group(1)) == DESCRIPTION[:3000]
    assert f"@conversation_handle = N'{GUID.upper()}'" in end
    # The database's own sp_executesql runs it; its name is a literal, quoted by QUOTENAME.
    context = "DECLARE @sp_executesql NVARCHAR(400) = QUOTENAME("
    assert end.startswith(context)
    name = re.match(re.escape(context) + r"(N'(?:[^']|'')*')\)", end)
    assert name is not None and _unquote(name.group(1)) == HOSTILE["database_name"]
    # ALTER QUEUE is dynamic SQL: the literal holds bracket-quoted identifiers, `]` doubled.
    inner = re.search(r"EXEC @sp_executesql (N'(?:[^']|'')*');", valid["re_enable_queue"], re.S)
    assert inner is not None
    assert _unquote(inner.group(1)) == (
        "ALTER QUEUE [Ad]]" + DROP + "é].[dbo].[Q']]" + DROP + "☃] WITH STATUS = ON;"
    )
    # RECEIVE batches (inspect, discard, park) name the queue the same way.
    for action in ("inspect_message", "discard", "park"):
        batch = re.search(r"sp_executesql\s+(?:-- [^\n]*\n\s*)?(N'(?:[^']|'')*')", valid[action])
        assert batch is not None, action
        text = _unquote(batch.group(1))
        assert "FROM [Ad]]" + DROP + "é].[dbo].[Q']]" + DROP + "☃]" in text
        assert "@conversation_handle" in text and GUID.upper() not in text
    assert "ROLLBACK TRANSACTION;" in valid["inspect_message"]
    assert "DATEADD(MINUTE, @delay_minutes" in valid["park"]
    assert "@delay_minutes = 60;" in valid["park"]


def test_jms_commands_are_json_with_quoted_filters(rendered: list[dict[str, Any]]) -> None:
    valid = rendered[0]
    command = json.loads(valid["dead_letter"])
    assert command["operation"] == "sendMessagesToDeadLetterAddress(java.lang.String)"
    message_id = HOSTILE["message_id"]
    assert command["arguments"] == ["AMQUserID = '" + message_id.replace("'", "''") + "'"]
    assert 'broker="b\\"1' + DROP + '"' in command["mbean"]
    # A DLQ copy is picked by its id and the queue it came from (multicast copies share ids).
    retry = json.loads(valid["retry_from_dlq"])
    orig_queue = HOSTILE["orig_queue"]
    assert retry["arguments"] == [
        "AMQUserID = '"
        + message_id.replace("'", "''")
        + "' AND _AMQ_ORIG_QUEUE = '"
        + orig_queue.replace("'", "''")
        + "'",
        orig_queue,
    ]
    agent = json.loads(valid["disable_consumer"])
    assert agent == {
        "type": "agent-platform",
        "operation": "disable_consumer",
        "consumer_id": HOSTILE["consumer_id"],
        "scheduled_group": HOSTILE["database_name"],
    }
