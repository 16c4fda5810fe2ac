"""`poisonwatch ingest`: real Spark, real files, hostile input built in tmp folders.

One SparkSession (and one store of its own) for the module. Every test writes its own landing
folder and looks only at rows whose source file lies inside it.
"""

from __future__ import annotations

import gzip
import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from support.store import module_store

from poisonwatch import ingest
from poisonwatch.cli import main as cli_main
from poisonwatch.ingest.loader import new_batch_id
from poisonwatch.ingest.sql import sql_string
from poisonwatch.warehouse.engine import Engine

GUID = "6F9619FF-8B86-D011-B42D-00C04FC964FF"


# One store and one Spark session for the module.
store, engine = module_store("ingest")


# The default server of `attempt()`: one per test, so that records of one test are never
# duplicates (same natural key) of records another test loaded into the shared store.
SERVER = ["sql1"]


@pytest.fixture(autouse=True)
def _own_store(store: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POISONWATCH_HOME", str(store))
    SERVER[0] = f"sql1-{tmp_path.name}"


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------


def write(path: Path, content: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def attempt(**changes: Any) -> str:
    """One ssb_receive_attempts record as a JSON line; a value of ... drops the field."""
    record: dict[str, Any] = {
        "attempted_at": "2024-05-01T10:00:00Z",
        "server_name": SERVER[0],
        "database_name": "Orders",
        "queue_name": "OrderQueue",
        "conversation_handle": GUID,
        "message_sequence_number": 1,
        "outcome": "committed",
    }
    record.update(changes)
    return json.dumps({k: v for k, v in record.items() if v is not ...}, ensure_ascii=False)


def run(engine: Engine, landing: Path) -> ingest.IngestSummary:
    summary = ingest.ingest(engine, landing)
    ingest.print_summary(summary)
    return summary


def rejects(engine: Engine, root: Path) -> list[tuple[str, int | None, str | None, str]]:
    """(file name, record number, field, reason) of the rejects of files under `root`."""
    like = sql_string(str(root.resolve()) + "/%")
    _, rows = engine.query(
        "select source_file, record_number, field, reason from raw.raw_rejects "
        f"where source_file like {like} order by source_file, record_number"
    )
    return [(Path(r[0]).name, r[1], r[2], r[3]) for r in rows]


def loaded(engine: Engine, table: str, root: Path, columns: str = "*") -> list[tuple[Any, ...]]:
    like = sql_string(str(root.resolve()) + "/%")
    _, rows = engine.query(
        f"select {columns} from raw.{table} where _source_file like {like} "
        "order by _source_file, _record_number"
    )
    return rows


def count(engine: Engine, table: str) -> int:
    return int(engine.scalar(f"select count(*) from raw.{table}"))


def lines_of(path: Path) -> int:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return sum(1 for _ in fh)


# ---------------------------------------------------------------------------------------------
# record-level rejects
# ---------------------------------------------------------------------------------------------


def test_every_record_reject_reason_names_file_record_and_field(
    engine: Engine, tmp_path: Path
) -> None:
    records = [
        attempt(),  # 1 loads
        "{not json",  # 2
        "[1, 2]",  # 3
        attempt(server_name=...),  # 4
        attempt(queue_name="  "),  # 5
        attempt(conversation_handle="x'; DROP TABLE y;--"),  # 6
        attempt(outcome="exploded"),  # 7
        attempt(attempted_at="2024-05-01T10:00:00"),  # 8
        attempt(attempted_at="yesterday"),  # 9
        attempt(attempted_at="2024-02-31T10:00:00Z"),  # 10
        attempt(message_sequence_number="1.5"),  # 11
        attempt(message_sequence_number=1.5),  # 12
        attempt(message_sequence_number="abc"),  # 13
        attempt(error_number=99999999999),  # 14
        attempt(server_name={"nested": 1}),  # 15
        attempt(reader=["a", "b"]),  # 16
        "",  # 17 blank: skipped, not rejected
        attempt(message_sequence_number=2, error_number="1205", reader="{not nested}"),  # 18 loads
        attempt(conversation_group_id="not-a-guid"),  # 19
        '{"attempted_at": "2024-05-01T10:00:00Z", "attempted_at": "2024-05-01T10:00:01Z"}',  # 20
        " \t ",  # 21 blank: spaces and tabs only
        " \u2028",  # 22 not blank: a line separator is no blank character (nor valid JSON)
        "[]",  # 23 valid JSON, but no object
    ]
    path = write(tmp_path / "ssb_receive_attempts" / "a.jsonl", "\n".join(records) + "\n")
    summary = run(engine, tmp_path)

    assert rejects(engine, tmp_path) == [
        ("a.jsonl", 2, None, "not valid JSON"),
        ("a.jsonl", 3, None, "not a JSON object (one object per line expected)"),
        ("a.jsonl", 4, "server_name", "server_name: required field is missing or empty"),
        ("a.jsonl", 5, "queue_name", "queue_name: required field is missing or empty"),
        (
            "a.jsonl",
            6,
            "conversation_handle",
            "conversation_handle: not a GUID ('x''; DROP TABLE y;--')",
        ),
        (
            "a.jsonl",
            7,
            "outcome",
            "outcome: not one of committed, rolled_back, rolled_back_to_savepoint, "
            "ended_conversation ('exploded')",
        ),
        (
            "a.jsonl",
            8,
            "attempted_at",
            "attempted_at: timestamp without a UTC offset (add Z or ±hh:mm) "
            "('2024-05-01T10:00:00')",
        ),
        ("a.jsonl", 9, "attempted_at", "attempted_at: not an ISO-8601 timestamp ('yesterday')"),
        (
            "a.jsonl",
            10,
            "attempted_at",
            "attempted_at: not a valid date/time ('2024-02-31T10:00:00Z')",
        ),
        (
            "a.jsonl",
            11,
            "message_sequence_number",
            "message_sequence_number: not an integer ('1.5')",
        ),
        (
            "a.jsonl",
            12,
            "message_sequence_number",
            "message_sequence_number: not an integer ('1.5')",
        ),
        (
            "a.jsonl",
            13,
            "message_sequence_number",
            "message_sequence_number: not an integer ('abc')",
        ),
        (
            "a.jsonl",
            14,
            "error_number",
            "error_number: integer out of range for int ('99999999999')",
        ),
        (
            "a.jsonl",
            15,
            "server_name",
            "server_name: a JSON object or array where text is expected ('{\"nested\":1}')",
        ),
        (
            "a.jsonl",
            16,
            "reader",
            'reader: a JSON object or array where text is expected (\'["a","b"]\')',
        ),
        (
            "a.jsonl",
            19,
            "conversation_group_id",
            "conversation_group_id: not a GUID ('not-a-guid')",
        ),
        ("a.jsonl", 20, None, "not valid JSON"),
        ("a.jsonl", 22, None, "not valid JSON"),
        ("a.jsonl", 23, None, "not a JSON object (one object per line expected)"),
    ]
    rows = loaded(
        engine,
        "ssb_receive_attempts",
        tmp_path,
        "_record_number, message_sequence_number, error_number, reader, _source_file",
    )
    assert rows == [(1, 1, None, None, str(path)), (18, 2, 1205, "{not nested}", str(path))]
    # original text is kept verbatim
    like = sql_string(str(path))
    original = engine.scalar(
        f"select original_text from raw.raw_rejects where source_file = {like} "
        "and record_number = 6"
    )
    assert original == records[5]
    d = summary.datasets["ssb_receive_attempts"]
    assert (d.files_loaded, d.records_loaded, d.records_rejected, d.blank_lines) == (1, 2, 19, 2)
    assert d.records_loaded + d.records_rejected + d.duplicates + d.blank_lines == lines_of(path)
    assert summary.rejected_total == 19


def test_booleans_base64_json_properties_and_enums_of_other_datasets(
    engine: Engine, tmp_path: Path
) -> None:
    state = {
        "snapshot_at": "2024-05-01T10:00:00Z",
        "server_name": "sql1",
        "database_name": "Orders",
        "queue_name": "q",
        "is_receive_enabled": True,
    }
    write(
        tmp_path / "ssb_queue_states" / "s.jsonl",
        "\n".join(
            json.dumps({**state, **change})
            for change in (
                {},
                {"is_receive_enabled": "FALSE", "max_readers": "5"},
                {"is_receive_enabled": 0},
                {"is_receive_enabled": "maybe"},
                {"is_enqueue_enabled": 2},
            )
        )
        + "\n",
    )
    snap = {
        "snapshot_at": "2024-05-01T10:00:00Z",
        "broker_name": "artemis",
        "address": "orders",
        "queue_name": "DLQ",
        "message_id": "ID:vm-36765-1795236730220-4:1:1:1:13",
    }
    # (one browse, five messages: rows of one snapshot with one id would be duplicates)
    write(
        tmp_path / "jms_queue_snapshots" / "j.jsonl",
        "\n".join(
            json.dumps({**snap, **change, "message_id": f"{snap['message_id']}:{n}"})
            for n, change in enumerate(
                (
                    {"properties": '{"_AMQ_ORIG_QUEUE": "orders"}'},
                    {"properties": {"nested": "object"}},
                    {"properties": "[1]"},
                    {"properties": "not json"},
                    {"body": {"a": 1}},
                )
            )
        )
        + "\n",
    )
    qs = {
        "snapshot_at": "2024-05-01T10:00:00Z",
        "server_name": "sql1",
        "database_name": "Orders",
        "queue_name": "q",
        "conversation_group_id": GUID,
        "conversation_handle": GUID,
        "message_sequence_number": 0,
        "message_type_name": "//orders/new",
    }
    write(
        tmp_path / "ssb_queue_snapshots" / "q.jsonl",
        "\n".join(
            json.dumps({**qs, **change})
            for change in (
                {"validation": "X", "message_body": "PGE+PC9hPg=="},
                {"validation": "Q"},
                {"message_body": "not base64!"},
                {"message_body": "abc"},
            )
        )
        + "\n",
    )
    activation = {
        "activation_id": "a1",
        "consumer_id": "c1",
        "server_name": "s1",
        "started_at": "2024-05-01T10:00:00Z",
    }
    write(
        tmp_path / "jms_activations" / "a.jsonl",
        json.dumps({**activation, "status": "running"})
        + "\n"
        + json.dumps({**activation, "status": "crashed"})
        + "\n",
    )
    run(engine, tmp_path)
    assert rejects(engine, tmp_path) == [
        ("a.jsonl", 2, "status", "status: not one of succeeded, failed, running ('crashed')"),
        ("j.jsonl", 3, "properties", "properties: not a JSON object ('[1]')"),
        ("j.jsonl", 4, "properties", "properties: not a JSON object ('not json')"),
        ("j.jsonl", 5, "body", "body: a JSON object or array where text is expected ('{\"a\":1}')"),
        ("q.jsonl", 2, "validation", "validation: not one of E, X, N ('Q')"),
        ("q.jsonl", 3, "message_body", "message_body: not base64 ('not base64!')"),
        ("q.jsonl", 4, "message_body", "message_body: not base64 ('abc')"),
        (
            "s.jsonl",
            4,
            "is_receive_enabled",
            "is_receive_enabled: not a boolean (true/false/1/0) ('maybe')",
        ),
        (
            "s.jsonl",
            5,
            "is_enqueue_enabled",
            "is_enqueue_enabled: not a boolean (true/false/1/0) ('2')",
        ),
    ]
    assert loaded(engine, "ssb_queue_states", tmp_path, "is_receive_enabled, max_readers") == [
        (True, None),
        (False, 5),
        (False, None),
    ]
    assert loaded(engine, "jms_queue_snapshots", tmp_path, "message_id, properties") == [
        ("ID:vm-36765-1795236730220-4:1:1:1:13:0", '{"_AMQ_ORIG_QUEUE": "orders"}'),
        ("ID:vm-36765-1795236730220-4:1:1:1:13:1", '{"nested":"object"}'),
    ]
    assert loaded(engine, "ssb_queue_snapshots", tmp_path, "validation, message_body") == [
        ("X", "PGE+PC9hPg==")
    ]


def test_timestamps_of_real_producers_are_normalised_to_utc(engine: Engine, tmp_path: Path) -> None:
    cases = {
        "2024-05-01T10:00:00Z": datetime(2024, 5, 1, 10, 0, 0),
        "2024-05-01T12:00:00+02:00": datetime(2024, 5, 1, 10, 0, 0),
        "2024-05-01T05:30:00-0430": datetime(2024, 5, 1, 10, 0, 0),
        "2024-05-01 10:00:00.123Z": datetime(2024, 5, 1, 10, 0, 0, 123000),
        "2024-05-01T10:00:00.123456Z": datetime(2024, 5, 1, 10, 0, 0, 123456),
        "2024-05-01T10:00:00.1234567Z": datetime(2024, 5, 1, 10, 0, 0, 123456),  # .NET ticks
        "2024-05-01T11:00:00.123456789+01:00": datetime(2024, 5, 1, 10, 0, 0, 123456),  # Java
        "2024-05-01t10:00:00.5z": datetime(2024, 5, 1, 10, 0, 0, 500000),
        "2024-12-31T23:30:00-01:00": datetime(2025, 1, 1, 0, 30, 0),
    }
    body = "".join(
        attempt(attempted_at=ts, message_sequence_number=i) + "\n"
        for i, ts in enumerate(cases, start=1)
    )
    write(tmp_path / "ssb_receive_attempts" / "ts.jsonl", body)
    run(engine, tmp_path)
    assert rejects(engine, tmp_path) == []
    got = loaded(engine, "ssb_receive_attempts", tmp_path, "attempted_at")
    assert [r[0] for r in got] == list(cases.values())


def test_guids_are_stored_upper_case_without_braces(engine: Engine, tmp_path: Path) -> None:
    write(
        tmp_path / "ssb_receive_attempts" / "g.jsonl",
        attempt(conversation_handle="{" + GUID.lower() + "}")
        + "\n"
        + attempt(conversation_handle="{" + GUID)
        + "\n",
    )
    run(engine, tmp_path)
    assert loaded(engine, "ssb_receive_attempts", tmp_path, "conversation_handle") == [(GUID,)]
    assert rejects(engine, tmp_path) == [
        ("g.jsonl", 2, "conversation_handle", f"conversation_handle: not a GUID ('{{{GUID}')")
    ]


# ---------------------------------------------------------------------------------------------
# CSV and Parquet
# ---------------------------------------------------------------------------------------------


def test_csv_quotes_commas_unicode_blank_lines_and_bad_rows(engine: Engine, tmp_path: Path) -> None:
    text = (
        "\ufeffbody,message_id,queue_name,address,broker_name,snapshot_at,delivery_count\r\n"
        '"he said ""hi"", then left",ID:1,DLQ,"orders,eu",artemis,2024-05-01T10:00:00Z,3\r\n'
        "Grüße 日本 €,ID:2,DLQ,orders,artemis,2024-05-01T10:00:00Z,\r\n"
        "\r\n"
        "x,ID:3,DLQ,orders,artemis,2024-05-01T10:00:00Z\r\n"
        'x,"ID:4,DLQ,orders,artemis,2024-05-01T10:00:00Z,1\r\n'
        "x,ID:5,DLQ,orders,artemis,2024-05-01T10:00:00,1\r\n"
        "x,ID:6,DLQ,orders,artemis,2024-05-01T10:00:00Z,three\r\n"
    )
    path = write(tmp_path / "jms_queue_snapshots" / "dlq.csv", text)
    summary = run(engine, tmp_path)
    assert loaded(
        engine, "jms_queue_snapshots", tmp_path, "body, message_id, address, delivery_count"
    ) == [
        ('he said "hi", then left', "ID:1", "orders,eu", 3),
        ("Grüße 日本 €", "ID:2", "orders", None),
    ]
    assert rejects(engine, tmp_path) == [
        ("dlq.csv", 5, None, "wrong number of fields (the header has 7)"),
        ("dlq.csv", 6, None, "unbalanced quotes (CSV records must be on one line each)"),
        (
            "dlq.csv",
            7,
            "snapshot_at",
            "snapshot_at: timestamp without a UTC offset (add Z or ±hh:mm) ('2024-05-01T10:00:00')",
        ),
        ("dlq.csv", 8, "delivery_count", "delivery_count: not an integer ('three')"),
    ]
    d = summary.datasets["jms_queue_snapshots"]
    # conservation: every line but the header is loaded, rejected, a duplicate or blank
    assert d.records_loaded + d.records_rejected + d.duplicates + d.blank_lines == (
        lines_of(path) - 1
    )
    assert d.blank_lines == 1


def test_parquet_typed_columns_row_numbers_and_original_row(engine: Engine, tmp_path: Path) -> None:
    table = pa.table(
        {
            "activation_id": ["a1", "a2", "a3"],
            "consumer_id": ["c1", "c1", None],
            "server_name": ["s1", "s2", "s3"],
            "started_at": pa.array(
                [datetime(2024, 5, 1, 10, 0), datetime(2024, 5, 1, 11, 0, 0, 250000), None],
                type=pa.timestamp("us", tz="UTC"),
            ),
            "status": ["succeeded", "oops", "running"],
            "extra": [1, 2, 3],
        }
    )
    (tmp_path / "jms_activations").mkdir()
    pq.write_table(table, tmp_path / "jms_activations" / "p.parquet")
    run(engine, tmp_path)
    assert loaded(
        engine, "jms_activations", tmp_path, "activation_id, started_at, _record_number"
    ) == [("a1", datetime(2024, 5, 1, 10, 0), 1)]
    assert rejects(engine, tmp_path) == [
        ("p.parquet", 2, "status", "status: not one of succeeded, failed, running ('oops')"),
        ("p.parquet", 3, "consumer_id", "consumer_id: required field is missing or empty"),
    ]
    like = sql_string(str((tmp_path / "jms_activations" / "p.parquet").resolve()))
    original = engine.scalar(
        f"select original_text from raw.raw_rejects where source_file = {like} "
        "and record_number = 2"
    )
    assert json.loads(original) == {
        "activation_id": "a2",
        "consumer_id": "c1",
        "server_name": "s2",
        "started_at": "2024-05-01T11:00:00.250Z",
        "status": "oops",
        "extra": 2,
    }


def test_decimal_numbers_load_from_json_csv_and_parquet_and_bad_ones_are_rejected(
    engine: Engine, tmp_path: Path
) -> None:
    """jms_address_settings.redelivery_multiplier is the contract's one double: a JSON number,
    CSV text with an exponent and a Parquet float load; text, NaN and a number too large for a
    double are rejected with the field named."""
    row = {
        "snapshot_at": "2024-05-01T10:00:00Z",
        "broker_name": "artemis",
        "address": "orders",
        "max_delivery_attempts": 10,
        "redelivery_delay_ms": 100,
    }
    write(
        tmp_path / "jms_address_settings" / "s.jsonl",
        "\n".join(
            json.dumps({**row, "queue_name": f"q{n}", "redelivery_multiplier": value})
            for n, value in enumerate((1.5, 2, "fast", "NaN", "1e999"))
        )
        + "\n",
    )
    write(
        tmp_path / "jms_address_settings" / "s.csv",
        "snapshot_at,broker_name,address,queue_name,redelivery_multiplier\n"
        "2024-05-01T10:00:00Z,artemis,orders,c1,2.5E0\n"
        "2024-05-01T10:00:00Z,artemis,orders,c2,.75\n",
    )
    table = pa.table(
        {
            "snapshot_at": ["2024-05-01T10:00:00Z"],
            "broker_name": ["artemis"],
            "address": ["orders"],
            "queue_name": ["p1"],
            "redelivery_multiplier": pa.array([1.25], type=pa.float32()),
        }
    )
    pq.write_table(table, tmp_path / "jms_address_settings" / "p.parquet")
    run(engine, tmp_path)
    assert loaded(
        engine, "jms_address_settings", tmp_path, "queue_name, redelivery_multiplier"
    ) == [("p1", 1.25), ("c1", 2.5), ("c2", 0.75), ("q0", 1.5), ("q1", 2.0)]
    assert rejects(engine, tmp_path) == [
        ("s.jsonl", 3, "redelivery_multiplier", "redelivery_multiplier: not a number ('fast')"),
        ("s.jsonl", 4, "redelivery_multiplier", "redelivery_multiplier: not a number ('NaN')"),
        (
            "s.jsonl",
            5,
            "redelivery_multiplier",
            "redelivery_multiplier: number out of range for double ('1e999')",
        ),
    ]


# ---------------------------------------------------------------------------------------------
# file-level failures
# ---------------------------------------------------------------------------------------------


def test_corrupt_files_are_rejected_whole_and_the_others_load(
    engine: Engine, tmp_path: Path
) -> None:
    good = "".join(attempt(message_sequence_number=i) + "\n" for i in range(1, 41))
    packed = gzip.compress(good.encode())
    write(tmp_path / "ssb_receive_attempts" / "a_good.jsonl.gz", packed)
    write(tmp_path / "ssb_receive_attempts" / "b_truncated.jsonl.gz", packed[: len(packed) // 2])
    write(tmp_path / "ssb_receive_attempts" / "c_plain.jsonl", attempt(message_sequence_number=99))
    write(tmp_path / "ssb_receive_attempts" / "notes.txt", "hello\n")
    write(tmp_path / "jms_activations" / "broken.parquet", b"PAR1 this is not parquet PAR1")
    write(tmp_path / "ssb_queue_states" / "no_header.csv", "snapshot_at,server_name\n")
    write(tmp_path / "mystery" / "x.jsonl", attempt() + "\n")
    write(tmp_path / "labels.jsonl", "{}\n")
    summary = run(engine, tmp_path)

    got = sorted(rejects(engine, tmp_path))
    assert [(name, number, field) for name, number, field, _ in got] == [
        ("b_truncated.jsonl.gz", None, None),
        ("broken.parquet", None, None),
        ("no_header.csv", None, None),
        ("notes.txt", None, None),
        ("x.jsonl", None, None),
    ]
    reasons = {name: reason for name, _, _, reason in got}
    assert reasons["b_truncated.jsonl.gz"].startswith("unreadable file: ")
    assert "end of input" in reasons["b_truncated.jsonl.gz"]
    assert reasons["broken.parquet"].startswith("unreadable file: ")
    assert reasons["no_header.csv"] == (
        "CSV header lacks required column(s): database_name, queue_name, is_receive_enabled"
    )
    assert reasons["notes.txt"].startswith("unknown file type")
    assert reasons["x.jsonl"].startswith("unknown dataset folder 'mystery'")
    numbers = loaded(engine, "ssb_receive_attempts", tmp_path, "message_sequence_number")
    assert sorted(r[0] for r in numbers) == [*range(1, 41), 99]  # nothing of the truncated file
    assert summary.unknown_folders == ["mystery"]
    assert [Path(p).name for p in summary.ignored] == ["labels.jsonl"]
    assert summary.datasets["ssb_receive_attempts"].files_failed == 2
    assert summary.rejected_total == 5


def test_a_misplaced_file_loads_once_moved_to_its_folder(engine: Engine, tmp_path: Path) -> None:
    body = attempt(reader="misplaced") + "\n"
    write(tmp_path / "ssb_recieve_attempts" / "a.jsonl", body)  # typo in the folder
    write(tmp_path / "ssb_receive_attempts" / "b.json", body)  # wrong extension
    first = run(engine, tmp_path)
    assert first.rejected_total == 2
    assert run(engine, tmp_path).rejected_total == 0  # a re-run adds no second reject
    (tmp_path / "ssb_recieve_attempts").rename(tmp_path / "ssb_receive_attempts_")
    (tmp_path / "ssb_receive_attempts_" / "a.jsonl").rename(
        tmp_path / "ssb_receive_attempts" / "a.jsonl"
    )
    (tmp_path / "ssb_receive_attempts" / "b.json").unlink()
    fixed = run(engine, tmp_path)
    assert fixed.datasets["ssb_receive_attempts"].records_loaded == 1
    assert loaded(engine, "ssb_receive_attempts", tmp_path, "reader") == [("misplaced",)]


def test_hostile_file_names_load(engine: Engine, tmp_path: Path) -> None:
    path = write(
        tmp_path / "ssb_broker_events" / "it's [a] {b}*?.jsonl",
        json.dumps(
            {
                "event_time": "2024-05-01T10:00:00Z",
                "server_name": "s",
                "database_name": "d",
                "queue_name": "q",
                "event_type": "BROKER_QUEUE_DISABLED",
            }
        )
        + "\n",
    )
    write(tmp_path / "ssb_broker_events" / "it.jsonl", "")  # an empty file loads nothing
    run(engine, tmp_path)
    assert loaded(engine, "ssb_broker_events", tmp_path, "_source_file, event_type") == [
        (str(path), "BROKER_QUEUE_DISABLED")
    ]
    assert rejects(engine, tmp_path) == []


# ---------------------------------------------------------------------------------------------
# idempotency and crash safety
# ---------------------------------------------------------------------------------------------


def _counts(engine: Engine) -> tuple[int, int, int]:
    return (
        count(engine, "ssb_receive_attempts"),
        count(engine, "raw_rejects"),
        count(engine, "ingested_files"),
    )


def test_reingest_changes_nothing_and_same_content_loads_once(
    engine: Engine, tmp_path: Path
) -> None:
    body = attempt() + "\n" + attempt(outcome="bad") + "\n"
    write(tmp_path / "ssb_receive_attempts" / "one.jsonl", body)
    write(tmp_path / "ssb_receive_attempts" / "copy.jsonl", body)
    write(tmp_path / "ssb_receive_attempts" / "bad.jsonl.gz", b"not gzip at all")
    first = run(engine, tmp_path)
    d = first.datasets["ssb_receive_attempts"]
    assert (d.files_loaded, d.files_skipped, d.files_failed) == (1, 1, 1)
    assert (d.records_loaded, d.records_rejected) == (1, 1)
    # The run leaves nothing cached: dropping its stage views freed their caches, also after
    # the chunk with the corrupt file failed.
    assert engine.spark._jsparkSession.sharedState().cacheManager().isEmpty()  # type: ignore[attr-defined]
    before = _counts(engine)

    second = run(engine, tmp_path)
    assert second.batch_id > first.batch_id  # even within the same second
    d = second.datasets["ssb_receive_attempts"]
    assert (d.files_loaded, d.files_skipped, d.files_failed) == (0, 3, 0)
    assert second.rejected_total == 0
    assert _counts(engine) == before


def test_a_run_killed_before_its_ledger_is_undone_by_the_next(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = "".join(attempt(message_sequence_number=i) + "\n" for i in range(5))
    write(tmp_path / "ssb_receive_attempts" / "crash.jsonl", body + attempt(outcome="x") + "\n")

    def crash(*_args: object) -> None:
        raise KeyboardInterrupt("killed before the ledger")

    with monkeypatch.context() as mp:
        mp.setattr(ingest.loader, "_write_ledger", crash)
        with pytest.raises(KeyboardInterrupt):
            ingest.ingest(engine, tmp_path)
    # the data of the killed run is there, but no ledger row: it is not committed
    assert len(loaded(engine, "ssb_receive_attempts", tmp_path)) == 5
    assert len(rejects(engine, tmp_path)) == 1

    summary = run(engine, tmp_path)
    assert len(summary.cleaned_batches) == 1
    # The watermark of the incremental models: a new batch sorts after every batch seen.
    assert summary.batch_id > summary.cleaned_batches[0]
    assert len(loaded(engine, "ssb_receive_attempts", tmp_path)) == 5  # once, not twice
    assert len(rejects(engine, tmp_path)) == 1
    assert summary.datasets["ssb_receive_attempts"].files_loaded == 1


def test_a_stage_left_by_a_killed_run_is_dropped_and_no_run_leaves_one(
    engine: Engine, tmp_path: Path
) -> None:
    """A chunk's records are staged in `raw.ingest_stage_<batch>`. A run killed after it
    wrote one leaves the table: the next run drops it. A run killed while it wrote one may
    leave files no table owns: the next run stages under its own batch's name, not there."""
    ingest.loader.ensure_tables(engine)
    engine.execute(
        "create table raw.ingest_stage_b20200101t000000z_0badf00d using parquet as select 1 as x"
    )
    _, rows = engine.query("describe database extended raw")
    location = next(str(r[1]) for r in rows if str(r[0]).lower() == "location")
    raw_dir = Path(location.removeprefix("file:"))
    (raw_dir / "ingest_stage_b20200101t000001z_0badf00d").mkdir()
    (raw_dir / "ingest_stage_b20200101t000001z_0badf00d" / "part-0.parquet").write_bytes(b"x")
    write(tmp_path / "ssb_receive_attempts" / "a.jsonl", attempt() + "\n")
    write(tmp_path / "jms_activations" / "a.jsonl", "not json\n")

    summary = run(engine, tmp_path)
    assert summary.datasets["ssb_receive_attempts"].records_loaded == 1
    assert summary.datasets["jms_activations"].records_rejected == 1
    _, tables = engine.query("show tables in raw like 'ingest_stage*'")
    assert tables == []
    assert sorted(p.name for p in raw_dir.glob("ingest_stage_*")) == [
        "ingest_stage_b20200101t000001z_0badf00d"
    ]


def test_files_a_failed_stage_left_are_removed_and_the_files_load_one_by_one(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A create of the stage that fails after it began writing (a cut gzip read mid-way, on
    some runs) leaves files at the stage's location. The chunk's files are then loaded one by
    one under the same name: the files left must go first, or Spark refuses every one of them
    (LOCATION_ALREADY_EXISTS, and each file is rejected as unreadable). Here the
    files are put there before the run, under the batch id the run is given, so the first
    create fails the same way every time."""
    batch = "b20200101T000002Z_0badf00d"
    monkeypatch.setattr(ingest.loader, "new_batch_id", lambda now, after=None: batch)
    ingest.loader.ensure_tables(engine)
    _, rows = engine.query("describe database extended raw")
    location = next(str(r[1]) for r in rows if str(r[0]).lower() == "location")
    left = Path(location.removeprefix("file:")) / f"ingest_stage_{batch.lower()}"
    left.mkdir()
    (left / "part-0.parquet").write_bytes(b"x")
    write(tmp_path / "ssb_receive_attempts" / "a.jsonl", attempt(queue_name="StageQ") + "\n")
    write(tmp_path / "ssb_receive_attempts" / "b.jsonl", attempt(queue_name="StageQ2") + "\n")

    summary = run(engine, tmp_path)
    assert summary.batch_id == batch
    assert summary.datasets["ssb_receive_attempts"].records_loaded == 2
    assert summary.datasets["ssb_receive_attempts"].files_failed == 0
    assert not left.exists()


def test_batch_ids_sort_after_the_newest_seen_even_when_the_clock_steps_back() -> None:
    now = datetime(2026, 11, 23, 1, 0, 0)
    assert new_batch_id(now).startswith("b20261123T010000Z_")
    # Same second as the newest batch, or a clock one hour behind it: one second past it.
    for newest in ("b20261123T010000Z_ffffffff", "b20261123T020000Z_00000000"):
        batch = new_batch_id(now, newest)
        assert batch > newest
        assert batch[:17] == "b" + (
            "20261123T010001Z" if newest.startswith("b20261123T01") else "20261123T020001Z"
        )
    assert new_batch_id(now, "b20261123T005959Z_ffffffff") > "b20261123T005959Z_ffffffff"


# ---------------------------------------------------------------------------------------------
# the command line
# ---------------------------------------------------------------------------------------------


def test_cli_strict_exits_non_zero_on_rejects_only(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    clean, dirty = tmp_path / "clean", tmp_path / "dirty"
    write(clean / "ssb_receive_attempts" / "ok.jsonl", attempt(reader="strict-ok") + "\n")
    write(dirty / "ssb_receive_attempts" / "bad.jsonl", attempt(outcome="nope") + "\n")
    assert cli_main(["ingest", "--strict", str(clean)]) == 0
    assert cli_main(["ingest", str(dirty)]) == 0
    write(dirty / "ssb_receive_attempts" / "bad2.jsonl", attempt(outcome="nope2") + "\n")
    assert cli_main(["ingest", "--strict", str(dirty)]) == 1
    out = capsys.readouterr().out
    assert "ssb_receive_attempts" in out and "rejected" in out
    assert os.environ["POISONWATCH_HOME"]  # still this module's store


# ---------------------------------------------------------------------------------------------
# re-landed files and overlapping exports
# ---------------------------------------------------------------------------------------------


def _parquet_bytes(tmp_path: Path, rows: list[dict[str, Any]]) -> bytes:
    path = tmp_path / "scratch.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    data = path.read_bytes()
    path.unlink()
    return data


def test_cut_gzip_and_bad_parquet_footer_are_rejected_whole_then_the_complete_file_loads(
    engine: Engine, tmp_path: Path
) -> None:
    good = "".join(attempt(message_sequence_number=i) + "\n" for i in range(1, 301))
    packed = gzip.compress(good.encode())
    folder = tmp_path / "ssb_receive_attempts"
    write(folder / "cut_mid_stream.jsonl.gz", packed[: len(packed) // 2])
    write(folder / "cut_trailer.jsonl.gz", packed[:-8])  # CRC32 and size missing
    write(folder / "cut_in_trailer.jsonl.gz", packed[:-3])
    states = [
        {
            "snapshot_at": "2024-05-01T10:00:00Z",
            "server_name": SERVER[0],
            "database_name": "Orders",
            "queue_name": f"Q{i}",
            "is_receive_enabled": True,
        }
        for i in range(20)
    ]
    parquet = _parquet_bytes(tmp_path, states)
    footer_length = int.from_bytes(parquet[-8:-4], "little")
    bad_length = parquet[:-8] + (footer_length + 7).to_bytes(4, "little") + b"PAR1"
    write(tmp_path / "ssb_queue_states" / "footer_length.parquet", bad_length)
    write(tmp_path / "ssb_queue_states" / "footer_cut.parquet", parquet[:-20])
    first = run(engine, tmp_path)

    got = sorted(rejects(engine, tmp_path))
    assert [(name, number, field) for name, number, field, _ in got] == [
        ("cut_in_trailer.jsonl.gz", None, None),
        ("cut_mid_stream.jsonl.gz", None, None),
        ("cut_trailer.jsonl.gz", None, None),
        ("footer_cut.parquet", None, None),
        ("footer_length.parquet", None, None),
    ]
    assert all(reason.startswith("unreadable file: ") for *_, reason in got), got
    assert loaded(engine, "ssb_receive_attempts", tmp_path) == []
    assert loaded(engine, "ssb_queue_states", tmp_path) == []
    assert first.records_loaded == 0 and first.rejected_total == 5

    # The complete files land later under other names: they load in full.
    write(folder / "complete.jsonl.gz", packed)
    write(tmp_path / "ssb_queue_states" / "complete.parquet", parquet)
    second = run(engine, tmp_path)
    assert second.datasets["ssb_receive_attempts"].records_loaded == 300
    assert second.datasets["ssb_queue_states"].records_loaded == 20
    assert second.datasets["ssb_receive_attempts"].duplicates == 0
    assert second.rejected_total == 0


CSV_HEADER = "attempted_at,server_name,database_name,queue_name,conversation_handle,"
CSV_HEADER += "message_sequence_number,outcome,error_number,error_message\n"


def _csv_attempt(seq: int, server: str) -> str:
    return (
        f"2024-05-01T10:00:0{seq}.123456Z,{server},Orders,OrderQueue,{GUID},{seq},"
        f"rolled_back,1205,deadlock victim number {seq}\n"
    )


def test_a_csv_cut_mid_record_then_landed_complete_adds_only_the_missing_records(
    engine: Engine, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = SERVER[0]
    complete = CSV_HEADER + "".join(_csv_attempt(i, server) for i in range(1, 6))
    write(tmp_path / "ssb_receive_attempts" / "export.csv", complete[:-12])  # in "number 5"
    first = run(engine, tmp_path)
    assert first.datasets["ssb_receive_attempts"].records_loaded == 4
    assert rejects(engine, tmp_path) == [
        (
            "export.csv",
            6,
            None,
            "last record has no line end: the file may have been cut mid-record "
            "(land the complete file again)",
        )
    ]
    write(tmp_path / "ssb_receive_attempts" / "export.complete.csv", complete)
    capsys.readouterr()
    second = run(engine, tmp_path)
    d = second.datasets["ssb_receive_attempts"]
    assert (d.records_loaded, d.duplicates, d.records_rejected) == (1, 4, 0)
    rows = loaded(
        engine, "ssb_receive_attempts", tmp_path, "message_sequence_number, error_message"
    )
    assert sorted(rows) == [(i, f"deadlock victim number {i}") for i in range(1, 6)]
    out = capsys.readouterr().out
    assert "dupes" in out and "export.complete.csv: 4" in out


def test_overlapping_exports_count_each_record_once_also_in_later_batches(
    engine: Engine, tmp_path: Path
) -> None:
    def at(second: int, micro: int = 0) -> str:
        return f"2024-05-01T11:00:{second:02d}.{micro:06d}Z"

    def ssb(second: int, **kw: Any) -> str:
        base = {"attempted_at": at(second), "outcome": "rolled_back", "error_number": 1205}
        return attempt(**{**base, **kw})

    folder = tmp_path / "ssb_receive_attempts"
    # "the last 10 seconds, every 5 seconds": records 0-9 and 5-14 in two files of one run;
    # a record repeated inside one file counts once too.
    write(folder / "h1.jsonl", "".join(ssb(s) + "\n" for s in [*range(10), 3]))
    write(folder / "h2.jsonl", "".join(ssb(s) + "\n" for s in range(5, 15)))
    # the same attempt written with another time format (offset, 7 digits) is the same time
    write(folder / "h3.jsonl", ssb(0, attempted_at="2024-05-01T13:00:14.0000000+02:00") + "\n")
    # differing only in microseconds, error number or outcome: different attempts
    write(folder / "h4.jsonl", "".join(
        ssb(1, **kw) + "\n"
        for kw in ({"attempted_at": at(1, 1)}, {"error_number": 1222}, {"outcome": "committed"})
    ))  # fmt: skip
    # with an attempt_id, the id alone is the key
    write(folder / "i1.jsonl", ssb(20, attempt_id="A-1") + "\n")
    write(folder / "i2.jsonl", attempt(attempted_at=at(21), attempt_id="A-1") + "\n")
    jms = {
        "broker_name": "artemis",
        "address": "orders",
        "queue_name": f"orders.{SERVER[0]}",
        "message_id": "ID:j1",
        "consumer_id": "agent.orders",
        "server_name": "app1",
        "outcome": "rolled_back",
    }
    jms_lines = [
        {**jms, "attempted_at": at(1), "delivery_count": 1},
        {**jms, "attempted_at": at(2), "delivery_count": 2},
        {**jms, "attempted_at": at(2), "delivery_count": 2, "exception_message": "other text"},
        {**jms, "attempted_at": at(2), "delivery_count": 2, "server_name": "app2"},
    ]
    write(tmp_path / "jms_receive_attempts" / "j.jsonl",
          "".join(json.dumps(r) + "\n" for r in jms_lines))  # fmt: skip
    snap = {
        "snapshot_at": at(30),
        "broker_name": "artemis",
        "address": "DLQ",
        "queue_name": f"DLQ.{SERVER[0]}",
        "message_id": "ID:j1",
        "orig_queue": "orders.a",
    }
    snaps = [snap, snap, {**snap, "orig_queue": "orders.b"}, {**snap, "snapshot_at": at(31)}]
    write(tmp_path / "jms_queue_snapshots" / "s.jsonl",
          "".join(json.dumps(r) + "\n" for r in snaps))  # fmt: skip
    first = run(engine, tmp_path)
    d = first.datasets["ssb_receive_attempts"]
    assert (d.records_loaded, d.duplicates) == (15 + 3 + 1, 1 + 5 + 1 + 1)
    assert len(loaded(engine, "ssb_receive_attempts", tmp_path)) == 19
    dupes = {Path(f).name: n for f, n in first.duplicate_files}
    assert dupes == {"h1.jsonl": 1, "h2.jsonl": 5, "h3.jsonl": 1, "i2.jsonl": 1, "j.jsonl": 1,
                     "s.jsonl": 1}  # fmt: skip
    assert first.datasets["jms_receive_attempts"].records_loaded == 3
    assert first.datasets["jms_queue_snapshots"].records_loaded == 3

    # A later batch repeating old records and adding one: only the new one counts.
    write(folder / "h5.jsonl", "".join(ssb(s) + "\n" for s in range(12, 16)))
    second = run(engine, tmp_path)
    d = second.datasets["ssb_receive_attempts"]
    assert (d.files_loaded, d.files_skipped, d.records_loaded, d.duplicates) == (1, 6, 1, 3)
    assert len(loaded(engine, "ssb_receive_attempts", tmp_path)) == 20
