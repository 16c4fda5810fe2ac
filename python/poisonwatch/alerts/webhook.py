"""Post each new alert to a webhook once, as JSON; again only after it resolved and fired anew.

An alert's id is the hash of its kind, subject and first_seen_at (models/marts/alerts.sql), so an
alert that resolves and fires again has a new id. The ids already posted are kept in a ledger
(one JSON object per line, appended after the server accepted the post) under the store, so a
second run posts nothing new and a crash between two posts re-posts at most the one in flight.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from poisonwatch.config import PoisonwatchError


def _posted(ledger: Path) -> set[str]:
    if not ledger.exists():
        return set()
    ids = set()
    for line in ledger.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                ids.add(json.loads(line)["alert_id"])
            except (ValueError, KeyError):
                continue  # a line torn by a crash: that alert is posted again
    return ids


def post_new_alerts(
    alerts: list[dict[str, Any]], url: str, ledger: Path, timeout: float = 10.0
) -> tuple[list[str], list[str]]:
    """POST every open alert not in the ledger; returns (posted ids, error messages)."""
    if not url.startswith(("http://", "https://")):
        raise PoisonwatchError(f"--webhook must be an http:// or https:// URL, got {url!r}")
    done = _posted(ledger)
    posted: list[str] = []
    errors: list[str] = []
    ledger.parent.mkdir(parents=True, exist_ok=True)
    for alert in alerts:
        if alert["status"] != "open" or alert["alert_id"] in done:
            continue
        body = json.dumps(alert, default=str, sort_keys=True).encode("utf-8")
        request = urllib.request.Request(
            url, data=body, method="POST", headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                status = response.status
        except (urllib.error.URLError, OSError) as exc:
            errors.append(f"{alert['alert_id']}: {exc}")
            continue
        if not 200 <= status < 300:
            errors.append(f"{alert['alert_id']}: HTTP {status}")
            continue
        with ledger.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"alert_id": alert["alert_id"], "url": url}) + "\n")
        done.add(alert["alert_id"])
        posted.append(alert["alert_id"])
    return posted, errors
