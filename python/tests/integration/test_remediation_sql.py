"""Hostile values give valid, escaped T-SQL: the remediation macros, rendered by real dbt and
evaluated by real Spark over hostile rows, then assembled into a DBA script and parsed with
sqlfluff's tsql dialect. The hostile text may only appear inside string literals or quoted
identifiers; an invalid handle gives no statement at all. The scripts are also read the way
sqlcmd and go-sqlcmd read them (sqlcmd_scanner): names with line breaks, `\\`, `$(x)`, `:!!`,
`:r` or `GO` lines give no batch, command or variable reference but the template's own, and
every value arrives exactly (non-ASCII names byte for byte in the UTF-8 file)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from support.child_python import SharedChild
from support.sqlcmd_scanner import literal_value, scan

from poisonwatch.remediation.plan import render_script, render_scripts, script_path, write_script

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

# Names that sqlcmd would read as commands, batch ends, variables or line continuations.
SQLCMD_GUID = "F1000000-0000-4000-8000-00000000000F"
SQLCMD_HOSTILE = {
    "database_name": "Pay\\\nroll\r\n:!! calc.exe\nGO\n$(x)\\",
    "queue_name": "dbo.Q\\'\n:r evil.sql\r:setvar x 1\u2028GO 5\u0085$(y)\\",
    "error_description": "done\\\n:!! rm -rf ~\nGO\n$(SQLCMDUSER) \\' ' \r\n:exit\n  go\n",
}
UNICODE_GUID = "F2000000-0000-4000-8000-00000000000F"
UNICODE = {"database_name": "Facturação", "queue_name": "dbo.Очередь"}
SQLCMD_SERVERS = ("SQL\\\n:!! calc", "SQL2$(x)\r\nGO\n:connect evil")

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
from support.child_dbt import compile_inline
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
        {**base, **SQLCMD_HOSTILE, "handle": SQLCMD_GUID},
        {**base, **UNICODE, "handle": UNICODE_GUID},
    ]
    data = shared_store.run(
        SCRIPT, {"PW_ROWS": json.dumps(rows, ensure_ascii=False), "PW_INLINE": INLINE}
    )
    by_handle = {r[0]: dict(zip(data["columns"], r, strict=True)) for r in data["rows"]}
    return [by_handle[r["handle"]] for r in rows]


SB_TYPES = ("end_conversation", "re_enable_queue", "inspect_message", "discard", "park")


def _unquote(literal: str) -> str:
    assert literal.startswith("N'") and literal.endswith("'"), literal[:40]
    body = literal[2:-1]
    assert re.fullmatch(r"(?:[^']|'')*", body, re.S), "an undoubled quote inside a literal"
    return body.replace("''", "'")


def test_invalid_handles_give_no_statement(rendered: list[dict[str, Any]]) -> None:
    valid, injected, trailing_newline, bad_code = rendered[:4]
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
    desc = re.search(r"DECLARE @error_description NVARCHAR\(3000\) = (N'(?:[^']|'')*');", end)
    assert desc is not None and "@error_description = @error_description;" in end
    assert _unquote(desc.group(1)) == DESCRIPTION[:3000]
    assert f"@conversation_handle = N'{GUID.upper()}'" in end
    # The database's own sp_executesql runs it; its name is a literal, quoted by QUOTENAME.
    context = "DECLARE @sp_executesql NVARCHAR(400) = QUOTENAME("
    assert end.startswith(context)
    name = re.match(re.escape(context) + r"(N'(?:[^']|'')*')\)", end)
    assert name is not None and _unquote(name.group(1)) == HOSTILE["database_name"]
    # ALTER QUEUE is dynamic SQL: the literal holds bracket-quoted identifiers, `]` doubled.
    inner = re.search(
        r"DECLARE @statement NVARCHAR\(MAX\) = (N'(?:[^']|'')*');\nEXEC @sp_executesql @statement;",
        valid["re_enable_queue"],
    )
    assert inner is not None
    assert _unquote(inner.group(1)) == (
        "ALTER QUEUE [Ad]]" + DROP + "é].[dbo].[Q']]" + DROP + "☃] WITH STATUS = ON;"
    )
    # RECEIVE batches (inspect, discard, park) name the queue the same way.
    for action in ("inspect_message", "discard", "park"):
        batch = re.search(
            r"DECLARE @statement NVARCHAR\(MAX\) = (N'(?:[^']|'')*');", valid[action], re.S
        )
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


def _sb_actions(row: dict[str, Any], server: str, first: int = 1) -> list[dict[str, Any]]:
    return [
        {
            "action_id": f"{n:064x}",
            "action_type": t,
            "statement_language": "tsql",
            "statement": row[t],
            "sequence_in_script": n,
            "server_name": server,
            "reason": "threshold_exceeded\n:!! calc $(x) it's\u202e",
            "policy_name": "policy",
            "collateral_message_count": 1,
        }
        for n, t in enumerate(SB_TYPES, start=first)
    ]


def _assert_inert(script: str, statements: int) -> None:
    """sqlcmd and go-sqlcmd both find the guard's batch and one batch per statement, no
    command, no variable, no continuation, no other line break, and nothing left open."""
    found = scan(script)
    assert found.variables == [], found.variables[:3]
    assert found.other_breaks == [], found.other_breaks[:3]
    assert "\r" not in script
    for reading in (found.tsql, found.go):
        assert reading.commands == [], reading.commands[:3]
        assert reading.continuations == [], reading.continuations[:3]
        assert reading.unterminated is None
        assert len(reading.separators) == statements + 1, reading.separators
        assert all(count == 1 for _, count in reading.separators)
        assert len(reading.batches) == statements + 1
    assert found.agree
    # No line ends in a backslash, no line but the separators is GO, none starts with `:`.
    for line in found.lines:
        assert not line.endswith("\\"), line
        assert not line.lstrip().startswith((":", "!!")), line
    assert [n for n, line in enumerate(found.lines, 1) if line.strip().lower() == "go"] == [
        n for n, _ in found.tsql.separators
    ]


def _expression(pattern: str, text: str) -> str:
    m = re.search(pattern, text, re.S)
    assert m is not None, (pattern, text[:300])
    return m.group(1)


def test_sqlcmd_reads_only_the_template(rendered: list[dict[str, Any]]) -> None:
    from sqlfluff.core import Linter

    row = rendered[4]
    for t in SB_TYPES:
        assert row[t] is not None, t  # carried, not refused
    actions = [
        *_sb_actions(row, SQLCMD_SERVERS[0]),
        *_sb_actions(row, SQLCMD_SERVERS[1], first=len(SB_TYPES) + 1),
    ]
    scripts = render_scripts(actions, "hostile\n:!! calc $(x)")
    assert sorted(scripts) == sorted(SQLCMD_SERVERS)  # one script per server
    database = SQLCMD_HOSTILE["database_name"]
    queue = SQLCMD_HOSTILE["queue_name"].split(".", 1)[1]
    for server, script in scripts.items():
        _assert_inert(script, len(SB_TYPES))
        parsed = Linter(dialect="tsql").parse_string(script)
        assert not parsed.violations, [str(v) for v in parsed.violations][:3]
        # Each value arrives exactly: the server in its guard, the database in QUOTENAME,
        # the description as a variable, the queue inside the dynamic SQL.
        guard = _expression(r"IF @@SERVERNAME <> ([^\n]*)\n", script)
        assert literal_value(guard) == server
        assert script.count("IF @@SERVERNAME") == 1
        end = row["end_conversation"]
        assert literal_value(_expression(r"QUOTENAME\((.*?)\) \+ N'\.sys", end)) == database
        assert (
            literal_value(
                _expression(
                    r"DECLARE @error_description NVARCHAR\(3000\) = (.*?);\nEXEC @sp_executesql",
                    end,
                )
            )
            == (SQLCMD_HOSTILE["error_description"])
        )
        alter = literal_value(
            _expression(
                r"DECLARE @statement NVARCHAR\(MAX\) = (.*?);\nEXEC @sp_executesql",
                row["re_enable_queue"],
            )
        )
        assert alter == (
            "ALTER QUEUE [" + database + "].[dbo].[" + queue.replace("]", "]]") + "] "
            "WITH STATUS = ON;"
        )
        for t in ("inspect_message", "discard", "park"):
            batch = literal_value(
                _expression(
                    r"DECLARE @statement NVARCHAR\(MAX\) = (.*?);\nEXEC @sp_executesql", row[t]
                )
            )
            assert f"FROM [{database}].[dbo].[{queue}]" in batch, t


def test_non_ascii_names_survive_byte_exactly(
    rendered: list[dict[str, Any]], tmp_path: Any
) -> None:
    row = rendered[5]
    scripts = render_scripts(_sb_actions(row, "SQLÜ1"), "Facturação")
    ((server, script),) = scripts.items()
    path = script_path(tmp_path / "remediation.sql", server)
    write_script(path, script)
    data = path.read_bytes()
    assert not data.startswith(b"\xef\xbb\xbf")  # UTF-8 without a byte-order mark
    assert data.decode("utf-8") == script
    assert "QUOTENAME(N'Facturação')".encode() in data
    assert "[Facturação].[dbo].[Очередь]".encode() in data
    assert "IF @@SERVERNAME <> N'SQLÜ1'".encode() in data
    # ... and the command in the header reads the file as UTF-8, without variables.
    assert "sqlcmd -S <server> -E -b -x -f 65001 -i <this file>" in script
    _assert_inert(script, len(SB_TYPES))


def test_comments_read_as_written_and_stay_inert() -> None:
    actions = [
        {
            "action_id": "a" * 64,
            "action_type": "end_conversation",
            "statement_language": "tsql",
            "statement": "SELECT 1;",
            "sequence_in_script": 1,
            "server_name": "SQL1",
            "reason": "it's\r\n:!! calc\\\nGO $(x)\u2028\x1b[2J\u202e",
            "collateral_message_count": 0,
        }
    ]
    script = render_script(actions, "title's\n:r x")
    assert "ends the poison message's conversation" in script
    assert "-- poisonwatch: title's" in script
    reason = next(line for line in script.splitlines() if line.startswith("-- reason "))
    assert reason.startswith("-- reason it's")
    assert "\x1b" not in script and "\u202e" not in script
    _assert_inert(script, 1)


def test_one_script_per_server_with_safe_names(tmp_path: Any) -> None:
    actions = [
        {
            "action_id": f"{n:064x}",
            "action_type": "re_enable_queue",
            "statement_language": "tsql",
            "statement": "SELECT 1;",
            "sequence_in_script": n,
            "server_name": server,
            "reason": "queue_disabled",
            "collateral_message_count": 0,
        }
        for n, server in enumerate(["SQL1", "SQL2\\INST", "SQL1", "sql1"], start=1)
    ]
    scripts = render_scripts(actions, "two servers")
    assert sorted(scripts) == ["SQL1", "SQL2\\INST", "sql1"]
    for server, script in scripts.items():
        assert script.count("IF @@SERVERNAME") == 1
        assert f"IF @@SERVERNAME <> N'{server}'" in script
    assert scripts["SQL1"].count("-- ") and scripts["SQL1"].count("\nGO\n") == 3
    with pytest.raises(ValueError):
        render_script(actions, "two servers")
    names = {server: script_path(tmp_path / "remediation.sql", server) for server in scripts}
    assert len({p.name.lower() for p in names.values()}) == 3  # distinct, also case-folded
    for p in names.values():
        assert p.parent == tmp_path
        assert re.fullmatch(r"remediation\.[a-z0-9-]{1,40}-[0-9a-f]{8}\.sql", p.name), p.name
    assert names["SQL2\\INST"].name.startswith("remediation.sql2-inst-")
    hostile = script_path(tmp_path / "r.sql", "../../etc/passwd\x00:CON")
    assert hostile.parent == tmp_path and re.fullmatch(
        r"r\.[a-z0-9-]+-[0-9a-f]{8}\.sql", hostile.name
    )


def test_awaiting_actions_are_listed_with_their_age() -> None:
    import datetime as dt

    from rich.console import Console

    from poisonwatch.remediation.plan import print_awaiting

    action = {
        "action_id": "b" * 64,
        "action_type": "end_conversation",
        "statement_language": "tsql",
        "statement": "SELECT 1;",
        "sequence_in_script": 3,
        "server_name": "SQL1",
        "queue_name": "dbo.Q",
        "conversation_handle": GUID.upper(),
        "message_id": None,
        "consumer_id": None,
        "reason": "threshold_exceeded",
        "collateral_message_count": 0,
        "script_written_at": dt.datetime(2026, 11, 20, 9, 55),
    }
    console = Console(record=True, width=200)
    print_awaiting([action], console, now=dt.datetime(2026, 11, 20, 12, 0, tzinfo=dt.UTC))
    text = console.export_text()
    assert "Awaiting confirmation (1)" in text
    assert "2026-11-20 09:55" in text and "2h 05m" in text
    assert "plan --sql FILE --awaiting" in text
    # Written again (plan --sql --awaiting), the script says since when it awaits.
    script = render_script([action], "again")
    assert "-- awaiting confirmation: first written 2026-11-20 09:55:00" in script
    _assert_inert(script, 1)
