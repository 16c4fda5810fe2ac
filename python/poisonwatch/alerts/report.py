"""Read the `alerts` mart, print it as a table or JSON lines, and give the exit code."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from rich.console import Console

from poisonwatch import textsafe
from poisonwatch.alerts.mutes import GROUP_PREFIX
from poisonwatch.alerts.screen import print_by_severity
from poisonwatch.config import PoisonwatchError, home

MART_DATABASE = "poisonwatch"
ALERT_KINDS = (
    "dlq_arrival_spike",
    "queue_disabled",
    "queue_disable_imminent",
    "queue_loops_forever",
    "queue_stalled",
    "breaker_tripped_still_receiving",
    "new_failure_group",
)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """'90s', '30m', '2h', '7d' (or a sum like '1h30m') as a timedelta."""
    parts = re.findall(r"(\d+)\s*([smhd])", text.strip().lower())
    if not parts or re.sub(r"\s*\d+\s*[smhd]\s*", "", text.strip().lower()):
        raise PoisonwatchError(f"{text!r} is not a duration like 30m, 2h or 7d")
    return timedelta(seconds=sum(int(n) * _UNITS[u] for n, u in parts))


def load_alerts(
    engine: Any, since: timedelta | None = None, kinds: list[str] | None = None
) -> list[dict[str, Any]]:
    """Every row of the mart (open and recently resolved), newest first; `since` keeps those
    seen within that long before the mart's clock (`evaluated_at`)."""
    if not engine.table_exists(MART_DATABASE, "alerts"):
        raise PoisonwatchError("the mart poisonwatch.alerts does not exist yet: run `dbt build`")
    for kind in kinds or []:
        if kind not in ALERT_KINDS:
            raise PoisonwatchError(f"--kind: {kind!r} is not one of {', '.join(ALERT_KINDS)}")
    columns, rows = engine.query(
        f"select * from `{MART_DATABASE}`.`alerts` order by last_seen_at desc, alert_id"
    )
    alerts = [dict(zip(columns, row, strict=True)) for row in rows]
    if kinds:
        alerts = [a for a in alerts if a["alert_kind"] in kinds]
    return alerts if since is None else seen_within(alerts, since)


def seen_within(rows: list[dict[str, Any]], since: timedelta) -> list[dict[str, Any]]:
    """The alerts or incidents last seen within `since` before the mart's clock."""
    return [
        r
        for r in rows
        if isinstance(r["last_seen_at"], datetime)
        and r["last_seen_at"] >= r["evaluated_at"] - since
    ]


def exit_code(alerts: list[dict[str, Any]]) -> int:
    """Monitoring-plugin convention over open alerts: 2 critical, 1 warning, 0 none."""
    severities = {a["severity"] for a in alerts if a["status"] == "open"}
    if "critical" in severities:
        return 2
    if "warning" in severities:
        return 1
    return 0


def json_lines(alerts: list[dict[str, Any]]) -> list[str]:
    """One JSON object per alert (times as ISO-8601 text)."""
    return [
        textsafe.json_text(
            json.dumps(
                {k: v.isoformat() if isinstance(v, datetime) else v for k, v in a.items()},
                sort_keys=True,
                ensure_ascii=False,
            )
        )
        for a in alerts
    ]


def _subject(alert: dict[str, Any]) -> str:
    if alert.get("consumer_id"):
        return str(alert["consumer_id"])
    if alert.get("queue_name"):
        return str(alert["queue_name"])
    if alert.get("failure_group_id"):
        return f"group {str(alert['failure_group_id'])[:GROUP_PREFIX]}"
    return "-"


def print_alerts(alerts: list[dict[str, Any]], console: Console | None = None) -> None:
    """One entry per alert within 80 columns: severity, kind, subject, status and since, then
    the detail wrapped under it (texts made inert)."""
    entries = []
    for a in alerts:
        since = a["first_seen_at"].strftime("%Y-%m-%d %H:%M") if a["first_seen_at"] else "?"
        head = (
            f"[bold]{a['alert_kind']}[/bold] {textsafe.terminal(_subject(a))} "
            f"({a['status']} since {since})"
        )
        entries.append((a["severity"], head + "\n" + textsafe.terminal(a["detail"], limit=240)))
    print_by_severity(entries, "no alerts", console)


def ledger_path() -> Path:
    """The webhook's ledger of incident posts, under the store."""
    return Path(home()) / "alerts" / "incidents_posted.jsonl"


def mutes_path() -> Path:
    """The operators' mutes, under the store."""
    return Path(home()) / "alerts" / "mutes.jsonl"


def run_alerts(
    target: str | None = None,
    since: str | None = None,
    fmt: str = "table",
    webhook: str | None = None,
    kinds: list[str] | None = None,
    include_resolved: bool = False,
    incidents: bool = False,
) -> int:
    """`poisonwatch alerts`: print the alerts (or the incidents), post the incidents' due
    events, return the exit code (0/1/2) of the open alerts."""
    from poisonwatch.alerts.incidents import (
        lifecycle,
        load_incidents,
        post_incident_events,
        print_incidents,
    )
    from poisonwatch.alerts.mutes import active_mutes, now_utc
    from poisonwatch.warehouse.engine import connect

    window = parse_duration(since) if since else None
    with connect(target, reads_only=True) as engine:
        alerts = load_alerts(engine, window, kinds)
        found = load_incidents(engine, kinds) if incidents or webhook else []
    mutes = active_mutes(mutes_path(), now_utc())
    if incidents:
        listed = lifecycle(found, ledger_path(), mutes)
        if window is not None:
            listed = seen_within(listed, window)
        if not include_resolved:
            listed = [i for i in listed if i["status"] != "resolved"]
        if fmt == "json":
            for line in json_lines(listed):
                print(line)
        else:
            print_incidents(listed)
    else:
        shown = alerts if include_resolved else [a for a in alerts if a["status"] == "open"]
        if fmt == "json":
            for line in json_lines(shown):
                print(line)
        else:
            print_alerts(shown)
    if webhook:
        posted, errors = post_incident_events(found, webhook, ledger_path(), mutes)
        err = Console(stderr=True)
        err.print(f"webhook: {len(posted)} incident event(s) posted")
        for message in errors:
            err.print(f"[red]webhook: {textsafe.terminal(message)}[/red]")
    return exit_code(alerts)


def run_mute(kind: str, subject: str, duration: str | None, reason: str, unmute: bool) -> int:
    """`poisonwatch alerts mute|unmute KIND SUBJECT`: no warehouse needed, a line in the mutes."""
    from poisonwatch.alerts import mutes

    if kind not in ALERT_KINDS:
        raise PoisonwatchError(f"KIND: {kind!r} is not one of {', '.join(ALERT_KINDS)}")
    now = mutes.now_utc()
    shown = f"{kind} on {textsafe.terminal(subject)}"
    out = Console(width=80)
    if unmute:
        ended = mutes.unmute(mutes_path(), kind, subject, now)
        out.print(f"unmuted {shown}" if ended else f"{shown} was not muted")
        return 0
    if duration is None:
        raise PoisonwatchError("alerts mute: say for how long with --for (30m, 2h, 7d)")
    entry = mutes.mute(mutes_path(), kind, subject, parse_duration(duration), reason, now)
    until = datetime.fromisoformat(entry["until"]).strftime("%Y-%m-%d %H:%M UTC")
    out.print(f"muted {shown} until {until}")
    return 0
