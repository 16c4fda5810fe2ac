"""Attacker-controlled text is inert in every terminal, CSV and JSON output.

No Spark: the printing functions get rows as the warehouse returns them. A hostile corpus —
rich markup, an ANSI clear-screen, HTML, a spreadsheet formula, a right-to-left override, a
bell, 1 MB of text — goes through `poisonwatch sql`'s three formats, the plan table and the
ingest summary; the store-backed outputs (check report, Data Docs, plan on a built store) are
covered in test_checks.py and test_remediation_apply.py.
"""

from __future__ import annotations

import csv
import io
import json
from collections import Counter
from pathlib import Path

from rich.console import Console

from poisonwatch import textsafe
from poisonwatch.ingest.loader import DatasetSummary, IngestSummary, print_summary
from poisonwatch.remediation.plan import Plan, print_plan
from poisonwatch.warehouse.sqlrun import print_rows

HOSTILE = [
    "[bold red]HIJACK[/bold red]",
    "\x1b[2J\x1b]0;title\x07",
    "<script>alert(1)</script>",
    '=HYPERLINK("http://evil.example","click")',
    "  +cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "abc\u202edcba",
    "back\\",
    "x" * (1 << 20),
]
RAW = ("\x1b", "\x07", "\u202e")


def _printed(fmt: str) -> str:
    out = io.StringIO()
    rows = [(text, -5, 1.5) for text in HOSTILE]
    print_rows(["value", "n", "f"], rows, fmt, out=out)
    return out.getvalue()


def test_terminal_escapes_markup_control_and_bidi_characters() -> None:
    console = Console(file=io.StringIO(), width=200)
    for text in HOSTILE[:8]:
        console.print(f"[dim]{textsafe.terminal(text)}[/dim]")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert not any(c in out for c in RAW)
    assert "[bold red]HIJACK[/bold red]" in out and "\\x1b[2J" in out and "\\u202e" in out
    assert "back\\" in out  # a trailing backslash does not swallow the caller's markup
    assert len(textsafe.terminal("x" * (1 << 20), limit=100)) == 100


def test_html_and_csv_cells_are_inert() -> None:
    assert textsafe.html('<script>"x"</script>\u202e') == (
        "&lt;script&gt;&quot;x&quot;&lt;/script&gt;\\u202e"
    )
    assert textsafe.csv_cell('=HYPERLINK("x")') == '\'=HYPERLINK("x")'
    assert textsafe.csv_cell("  @SUM(1)") == "'  @SUM(1)"
    assert textsafe.csv_cell("\uff1d1+1") == "'\uff1d1+1"  # full-width equals sign
    assert textsafe.csv_cell(-5) == -5 and textsafe.csv_cell("plain") == "plain"


def test_sql_table_output_is_inert_and_cut() -> None:
    out = _printed("table")
    assert not any(c in out for c in RAW)
    assert "[bold red]HIJACK[/bold red]" in out
    assert len(out) < 200_000  # the 1 MB value is cut in a terminal table


def test_sql_csv_output_has_no_formula_cells_and_keeps_numbers() -> None:
    out = _printed("csv")
    assert not any(c in out for c in RAW)
    csv.field_size_limit(1 << 24)
    rows = list(csv.reader(io.StringIO(out)))
    cells = [row[0] for row in rows[1:]]
    assert not [c for c in cells if c.lstrip(" ").startswith(("=", "+", "-", "@"))]
    assert cells[3].startswith("'=HYPERLINK")
    assert {row[1] for row in rows[1:]} == {"-5"}  # a negative number stays a number
    assert max(len(c) for c in cells) == 1 << 20  # nothing cut


def test_sql_json_output_is_exact_and_inert() -> None:
    out = _printed("json")
    assert not any(c in out for c in RAW)
    values = [json.loads(line)["value"] for line in out.splitlines()]
    assert values == HOSTILE


def test_plan_table_and_ingest_summary_show_names_as_text() -> None:
    action = {
        "sequence_in_script": 1,
        "action_type": "dead_letter",
        "queue_name": "orders[bold red]\u202e",
        "conversation_handle": None,
        "message_id": "ID:\x1b[2J[link=http://evil]x[/link]",
        "consumer_id": None,
        "reason": "max_deliveries",
        "review_reason": None,
        "requires_review": False,
        "collateral_message_count": 0,
        "action_id": "a" * 64,
    }
    plan = Plan([action], Counter({("dead_letter", action["queue_name"]): 1}))
    console = Console(file=io.StringIO(), width=200)
    print_plan(plan, console=console)
    summary = IngestSummary(landing=Path("/l"), batch_id="b")
    summary.datasets["ssb_receive_attempts"] = DatasetSummary(files_loaded=1, duplicates=2)
    summary.duplicate_files.append(("/l/ssb_receive_attempts/[bold]\x1b[2J.csv", 2))
    print_summary(summary, console=console)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert not any(c in out for c in RAW)
    assert "orders[bold red]\\u202e" in out and "[link=http://evil]x[/link]" in out
    assert "[bold]\\x1b[2J.csv: 2" in out


# Invisible or glyph-changing characters: tag characters (text hidden after a flag emoji), the
# soft hyphen, the Mongolian vowel separator and variation selectors of both blocks.
INVISIBLE = {
    "\U000e0041": "\\U000e0041",
    "\U000e007f": "\\U000e007f",
    "\xad": "\\xad",
    "\u180e": "\\u180e",
    "\ufe0f": "\\ufe0f",
    "\U000e0100": "\\U000e0100",
    "\U000e01ef": "\\U000e01ef",
}


def test_tag_characters_soft_hyphen_and_variation_selectors_are_shown() -> None:
    hidden = "pay" + "".join(INVISIBLE) + "roll"
    for form in (textsafe.terminal(hidden), textsafe.html(hidden), str(textsafe.csv_cell(hidden))):
        assert not any(c in form for c in INVISIBLE), form
        assert all(escape in form for escape in INVISIBLE.values()), form
    assert textsafe.csv_cell("\xad=1+1") == "\\xad=1+1"  # shown, so not a formula either
    # JSON keeps the exact value (a surrogate pair beyond the BMP) and shows no raw character.
    dumped = textsafe.json_text(json.dumps({"v": hidden}, ensure_ascii=False))
    assert not any(c in dumped for c in INVISIBLE)
    assert json.loads(dumped)["v"] == hidden
    assert "\\udb40\\udc41" in dumped
