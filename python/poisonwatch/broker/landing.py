"""The `jms_queue_snapshots` record both collectors write (Classic over STOMP, Artemis over
Jolokia): its dataset name, its columns in the landing contract's order, its times and numbers."""

from __future__ import annotations

import datetime as dt
from typing import Any

DATASET = "jms_queue_snapshots"
# The delivery settings a broker applies per queue (Artemis only: Classic keeps them client-side).
SETTINGS_DATASET = "jms_address_settings"
# The landing contract's columns, in order (poisonwatch/schemas.py).
COLUMNS = (
    "snapshot_at",
    "broker_name",
    "address",
    "queue_name",
    "message_id",
    "enqueued_at",
    "delivery_count",
    "priority",
    "group_id",
    "orig_address",
    "orig_queue",
    "message_type",
    "body",
    "properties",
)
# Set in `properties` when `body` holds base64 because the body is not UTF-8 text.
BODY_ENCODING_PROPERTY = "poisonwatch_body_encoding"


def integer(value: Any) -> int | None:
    """A broker's number (text or JSON) as an int; None when missing or not a number."""
    try:
        return int(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def iso(ts: dt.datetime) -> str:
    return ts.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def millis(value: str | None) -> str | None:
    """Epoch milliseconds as text → `iso`; None when missing, not a number or not positive."""
    try:
        ms = int(value or "")
    except ValueError:
        return None
    if ms <= 0:
        return None
    return iso(dt.datetime.fromtimestamp(ms / 1000, dt.UTC))
