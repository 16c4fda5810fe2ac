"""The landing contract (DESIGN.md, "Landing contract") as data.

One entry per dataset: its columns in order, each with a type, whether it is required, and any
constraint (enum values, GUID form). `ingest` validates against this, creates the raw tables
from it, and the generator writes its columns in this order.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

RAW_DATABASE = "raw"
REJECTS_TABLE = "raw_rejects"
LEDGER_TABLE = "ingested_files"

# Spark SQL types used in raw tables.
STRING = "string"
TIMESTAMP = "timestamp"
BIGINT = "bigint"
INT = "int"
BOOLEAN = "boolean"
DOUBLE = "double"


@dataclass(frozen=True)
class Column:
    name: str
    type: str
    required: bool = False
    enum: tuple[str, ...] = ()
    guid: bool = False
    base64: bool = False
    json_object: bool = False
    description: str = ""


@dataclass(frozen=True)
class Dataset:
    name: str
    broker_kind: str
    description: str
    columns: tuple[Column, ...] = field(default_factory=tuple)

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def column(self, name: str) -> Column:
        for c in self.columns:
            if c.name == name:
                return c
        raise KeyError(name)


def _c(name: str, type_: str = STRING, required: bool = False, **kw: object) -> Column:
    return Column(name=name, type=type_, required=required, **kw)  # type: ignore[arg-type]


SSB_OUTCOMES = ("committed", "rolled_back", "rolled_back_to_savepoint", "ended_conversation")
JMS_OUTCOMES = ("acknowledged", "rolled_back", "temporarily_unavailable")
ACTIVATION_STATUSES = ("succeeded", "failed", "running")
VALIDATIONS = ("E", "X", "N")

DATASETS: dict[str, Dataset] = {
    d.name: d
    for d in (
        Dataset(
            "ssb_queue_snapshots",
            "service_broker",
            "One row per message in a Service Broker queue at snapshot time "
            "(SELECT * FROM <queue>).",
            (
                _c("snapshot_at", TIMESTAMP, True),
                _c("server_name", STRING, True),
                _c("database_name", STRING, True),
                _c("queue_name", STRING, True),
                _c("status", INT),
                _c("priority", INT),
                _c("queuing_order", BIGINT),
                _c("conversation_group_id", STRING, True, guid=True),
                _c("conversation_handle", STRING, True, guid=True),
                _c("message_sequence_number", BIGINT, True),
                _c("service_name", STRING),
                _c("service_contract_name", STRING),
                _c("message_type_name", STRING, True),
                _c("validation", STRING, enum=VALIDATIONS),
                _c("message_body", STRING, base64=True),
                _c("message_enqueue_time", TIMESTAMP),
            ),
        ),
        Dataset(
            "ssb_queue_states",
            "service_broker",
            "sys.service_queues at snapshot time: whether each queue receives, enqueues and "
            "activates.",
            (
                _c("snapshot_at", TIMESTAMP, True),
                _c("server_name", STRING, True),
                _c("database_name", STRING, True),
                _c("queue_name", STRING, True),
                _c("is_receive_enabled", BOOLEAN, True),
                _c("is_enqueue_enabled", BOOLEAN),
                _c("is_activation_enabled", BOOLEAN),
                _c("is_poison_message_handling_enabled", BOOLEAN),
                _c("activation_procedure", STRING),
                _c("max_readers", INT),
            ),
        ),
        Dataset(
            "ssb_receive_attempts",
            "service_broker",
            "The application's log of each attempt to process one received message, written "
            "after its transaction ended (seed 004).",
            (
                _c("attempted_at", TIMESTAMP, True),
                _c("server_name", STRING, True),
                _c("database_name", STRING, True),
                _c("queue_name", STRING, True),
                _c("conversation_group_id", STRING, guid=True),
                _c("conversation_handle", STRING, True, guid=True),
                _c("message_sequence_number", BIGINT, True),
                _c("message_type_name", STRING),
                _c("outcome", STRING, True, enum=SSB_OUTCOMES),
                _c("error_number", INT),
                _c("error_message", STRING),
                _c("reader", STRING),
                _c("attempt_id", STRING),
            ),
        ),
        Dataset(
            "ssb_broker_events",
            "service_broker",
            "Service Broker event notifications (e.g. BROKER_QUEUE_DISABLED).",
            (
                _c("event_time", TIMESTAMP, True),
                _c("server_name", STRING, True),
                _c("database_name", STRING, True),
                _c("queue_name", STRING, True),
                _c("event_type", STRING, True),
            ),
        ),
        Dataset(
            "jms_receive_attempts",
            "jms",
            "Each delivery of a JMS message to a consumer and what the consumer did with it.",
            (
                _c("attempted_at", TIMESTAMP, True),
                _c("broker_name", STRING, True),
                _c("address", STRING, True),
                _c("queue_name", STRING, True),
                _c("message_id", STRING, True),
                _c("correlation_id", STRING),
                _c("group_id", STRING),
                _c("delivery_count", INT),
                _c("redelivered", BOOLEAN),
                _c("orig_address", STRING),
                _c("orig_queue", STRING),
                _c("message_type", STRING),
                _c("consumer_id", STRING, True),
                _c("server_name", STRING, True),
                _c("activation_id", STRING),
                _c("outcome", STRING, True, enum=JMS_OUTCOMES),
                _c("exception_class", STRING),
                _c("exception_message", STRING),
                _c("stack_trace", STRING),
            ),
        ),
        Dataset(
            "jms_queue_snapshots",
            "jms",
            "A browse of a JMS queue (dead-letter queues included) at snapshot time.",
            (
                _c("snapshot_at", TIMESTAMP, True),
                _c("broker_name", STRING, True),
                _c("address", STRING, True),
                _c("queue_name", STRING, True),
                _c("message_id", STRING, True),
                _c("enqueued_at", TIMESTAMP),
                _c("delivery_count", INT),
                _c("priority", INT),
                _c("group_id", STRING),
                _c("orig_address", STRING),
                _c("orig_queue", STRING),
                _c("message_type", STRING),
                _c("body", STRING),
                _c("properties", STRING, json_object=True),
            ),
        ),
        Dataset(
            "jms_address_settings",
            "jms",
            "The delivery settings a JMS broker applies to each of its queues at snapshot time "
            "(Artemis: the address settings of the queue's address, wildcard matches resolved "
            "by the broker).",
            (
                _c("snapshot_at", TIMESTAMP, True),
                _c("broker_name", STRING, True),
                _c("address", STRING, True),
                _c("queue_name", STRING, True),
                _c("max_delivery_attempts", INT),
                _c("redelivery_delay_ms", BIGINT),
                _c("redelivery_multiplier", DOUBLE),
                _c("max_redelivery_delay_ms", BIGINT),
                _c("dead_letter_address", STRING),
            ),
        ),
        Dataset(
            "jms_activations",
            "jms",
            "One row per activation (run) of a consumer setting on a server.",
            (
                _c("activation_id", STRING, True),
                _c("consumer_id", STRING, True),
                _c("server_name", STRING, True),
                _c("started_at", TIMESTAMP, True),
                _c("finished_at", TIMESTAMP),
                _c("status", STRING, True, enum=ACTIVATION_STATUSES),
            ),
        ),
    )
}

# An ingest run's id, the `_batch_id` below: `b<UTC start, %Y%m%dT%H%M%SZ>_<8 hex digits>`, so
# that ids sort by when their run started.
BATCH_RE = re.compile(r"b\d{8}T\d{6}Z_[0-9a-f]{8}")

# Columns the ingest adds to every raw table.
LINEAGE_COLUMNS: tuple[Column, ...] = (
    Column("_source_file", STRING, description="Landing file the record came from."),
    Column("_record_number", BIGINT, description="1-based line (jsonl, csv) or row (parquet)."),
    Column("_ingested_at", TIMESTAMP, description="When the ingest run loaded it (UTC)."),
    Column("_batch_id", STRING, description="Ingest run id; raw tables are partitioned by it."),
)

REJECT_COLUMNS: tuple[Column, ...] = (
    Column("dataset", STRING, description="Landing dataset (folder) the record came from."),
    Column("source_file", STRING, description="Landing file, as given to ingest."),
    Column("record_number", BIGINT, description="1-based line or row; null for whole files."),
    Column("field", STRING, description="Field at fault; null for whole records or files."),
    Column("reason", STRING, description="Why it was rejected, in words."),
    Column("original_text", STRING, description="The record as it was in the file."),
    Column("_ingested_at", TIMESTAMP, description="When the ingest run saw it (UTC)."),
    Column("_batch_id", STRING, description="Ingest run id (partition)."),
)

LEDGER_COLUMNS: tuple[Column, ...] = (
    Column("content_hash", STRING, description="sha256 of the file's bytes: the idempotency key."),
    Column("dataset", STRING, description="Landing dataset."),
    Column("source_file", STRING, description="Path of the file when it was ingested."),
    Column("file_bytes", BIGINT, description="Size in bytes."),
    Column("loaded_records", BIGINT, description="Records loaded into the raw table."),
    Column("rejected_records", BIGINT, description="Records written to raw_rejects."),
    Column("_ingested_at", TIMESTAMP, description="When (UTC)."),
    Column("_batch_id", STRING, description="Ingest run id."),
)


def _columns_ddl(columns: tuple[Column, ...]) -> str:
    return ",\n    ".join(f"`{c.name}` {c.type}" for c in columns)


def raw_table_ddl(dataset: Dataset, file_format: str) -> str:
    """CREATE TABLE for a raw dataset: contract columns + lineage, partitioned by `_batch_id`.

    Partitioning by ingest batch lets an interrupted ingest be undone by dropping the partitions
    of batches that never reached the ledger (no DELETE needed on Parquet).
    """
    cols = dataset.columns + LINEAGE_COLUMNS
    return (
        f"create table if not exists `{RAW_DATABASE}`.`{dataset.name}` (\n    "
        f"{_columns_ddl(cols)}\n) using {file_format} partitioned by (`_batch_id`)"
    )


def rejects_table_ddl(file_format: str) -> str:
    return (
        f"create table if not exists `{RAW_DATABASE}`.`{REJECTS_TABLE}` (\n    "
        f"{_columns_ddl(REJECT_COLUMNS)}\n) using {file_format} partitioned by (`_batch_id`)"
    )


def ledger_table_ddl(file_format: str) -> str:
    return (
        f"create table if not exists `{RAW_DATABASE}`.`{LEDGER_TABLE}` (\n    "
        f"{_columns_ddl(LEDGER_COLUMNS)}\n) using {file_format}"
    )


def create_raw_tables(engine: object, file_format: str | None = None) -> None:
    """Create database `raw` and every raw table (empty) if missing. `engine` has `.execute`;
    `file_format` defaults to the project's (config.table_format)."""
    from poisonwatch.config import table_format

    file_format = file_format or table_format()
    execute = engine.execute  # type: ignore[attr-defined]
    execute(f"create database if not exists `{RAW_DATABASE}`")
    for dataset in DATASETS.values():
        execute(raw_table_ddl(dataset, file_format))
    execute(rejects_table_ddl(file_format))
    execute(ledger_table_ddl(file_format))
