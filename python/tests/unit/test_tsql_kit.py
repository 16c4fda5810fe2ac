"""docs/service_broker_kit.sql (the Service Broker half of seed 004): sqlfluff's tsql dialect
parses every batch, sqlcmd reads only its own batches, the CATCH block rolls back before it
records the incident, and each export view writes exactly the landing contract's columns, in
order."""

from __future__ import annotations

import re
from pathlib import Path

import sqlfluff
from support.sqlcmd_scanner import scan

from poisonwatch.warehouse.schemas import DATASETS

KIT = Path(__file__).resolve().parents[3] / "docs" / "service_broker_kit.sql"


def _views() -> dict[str, str]:
    text = KIT.read_text()
    found = re.findall(
        r"CREATE VIEW dbo\.poisonwatch_(\w+)\s+AS\s+(.*?)\nGO", text, flags=re.DOTALL
    )
    return dict(found)


def test_the_kit_parses_as_tsql() -> None:
    # raises sqlfluff.api.APIParsingError on any unparsable section
    tree = sqlfluff.parse(KIT.read_text(), dialect="tsql")
    assert tree


def test_sqlcmd_reads_only_its_batches() -> None:
    # sqlcmd and go-sqlcmd find the kit's own GO batches, no command, variable or
    # continuation, and the header's command reads the UTF-8 file without variables.
    text = KIT.read_text(encoding="utf-8")
    found = scan(text)
    assert found.variables == [] and found.other_breaks == []
    for reading in (found.tsql, found.go):
        assert reading.commands == [] and reading.continuations == []
        assert reading.unterminated is None
        assert len(reading.separators) == text.count("\nGO\n") == len(reading.batches)
    assert found.agree
    assert "sqlcmd -S <server> -d <database> -E -b -x -f 65001 -i <file>" in text
    assert not KIT.read_bytes().startswith(b"\xef\xbb\xbf")


def test_the_catch_block_rolls_back_before_recording() -> None:
    catch = KIT.read_text().split("BEGIN CATCH", 1)[1].split("END CATCH", 1)[0]
    assert catch.index("ROLLBACK TRANSACTION") < catch.index("INSERT INTO")
    assert "N'rolled_back'" in catch


def test_export_views_write_the_landing_contract_columns() -> None:
    views = _views()
    assert set(views) == {"ssb_receive_attempts", "ssb_queue_snapshots", "ssb_queue_states"}
    for dataset, body in views.items():
        json_part = body.split("FOR JSON", 1)[0].rsplit("SELECT", 1)[1]
        aliases = re.findall(r"\bAS (\w+),?\n", json_part)
        assert aliases == DATASETS[dataset].column_names, dataset
