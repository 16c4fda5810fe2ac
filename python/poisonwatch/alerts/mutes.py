"""Mutes: an operator's "I know, stop telling me" for one alert kind and subject, until a time.

Kept as JSON lines under the store (`alerts/mutes.jsonl`), appended; the latest line for a kind
and subject wins, so `unmute` is a line that ends the mute now. A mute expires by itself: it
applies while the wall clock is before its `until`. Muted incidents stay in every listing; only
the webhook stays silent about them.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from poisonwatch.alerts.webhook import open_ledger, read_ledger
from poisonwatch.config import PoisonwatchError

# The incident columns a mute's SUBJECT may name (as `alerts` and the report show them); a
# failure group also by the first GROUP_PREFIX or more digits of its id, as `alerts` shows it.
SUBJECT_COLUMNS = ("subject", "queue_name", "consumer_id", "failure_group_id")
GROUP_PREFIX = 12


def _append(path: Path, entry: dict[str, Any]) -> None:
    with open_ledger(path) as fh:
        fh.write(json.dumps(entry, sort_keys=True) + "\n")


def mute(
    path: Path, kind: str, subject: str, duration: timedelta, reason: str, now: datetime
) -> dict[str, Any]:
    """Mute `kind` on `subject` for `duration` from `now`; returns the entry written."""
    if not subject.strip():
        raise PoisonwatchError("alerts mute: SUBJECT is empty")
    if duration <= timedelta(0):
        raise PoisonwatchError("alerts mute: --for must be longer than nothing")
    if not reason.strip():
        raise PoisonwatchError('alerts mute: say why with --reason "…" (shown beside the mute)')
    entry = {
        "alert_kind": kind,
        "subject": subject,
        "muted_at": now.isoformat(),
        "until": (now + duration).isoformat(),
        "reason": reason,
    }
    _append(path, entry)
    return entry


def unmute(path: Path, kind: str, subject: str, now: datetime) -> bool:
    """End the mute of `kind` on `subject` now; False when none was active."""
    if (kind, subject) not in active_mutes(path, now):
        return False
    entry = {
        "alert_kind": kind,
        "subject": subject,
        "muted_at": now.isoformat(),
        "until": now.isoformat(),
        "reason": "unmuted",
    }
    _append(path, entry)
    return True


def active_mutes(path: Path, now: datetime) -> dict[tuple[str, str], dict[str, Any]]:
    """(kind, subject) -> the latest mute entry, for mutes still running at `now`."""
    latest: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in read_ledger(path):  # a line a crash cut short: that mute was never confirmed
        try:
            key = (str(entry["alert_kind"]), str(entry["subject"]))
            entry["until_at"] = datetime.fromisoformat(entry["until"])
        except (ValueError, KeyError, TypeError):
            continue
        latest[key] = entry
    return {k: e for k, e in latest.items() if e["until_at"] > now}


def mute_of(
    incident: dict[str, Any], mutes: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any] | None:
    """The running mute that covers `incident` (its kind, and its subject, queue, consumer or
    failure group), or None."""
    kind = incident["alert_kind"]
    for column in SUBJECT_COLUMNS:
        value = incident.get(column)
        if value is not None and (kind, str(value)) in mutes:
            return mutes[(kind, str(value))]
    group = incident.get("failure_group_id")
    if group is not None:
        for (muted_kind, subject), entry in mutes.items():
            if muted_kind == kind and len(subject) >= GROUP_PREFIX and group.startswith(subject):
                return entry
    return None


def now_utc() -> datetime:
    """The wall clock, in UTC (mutes are operators' time, not data time)."""
    return datetime.now(UTC)
