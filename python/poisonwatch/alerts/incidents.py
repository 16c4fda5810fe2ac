"""Incidents (the mart `alert_incidents`): listed, and posted to a webhook once per change.

An incident is posted when it opens, when its severity changes and when it resolves, each once:
the posts made are kept in a ledger under the store (`alerts/incidents_posted.jsonl`, one JSON
object per line, appended after the server accepted the post), so a second run posts nothing
new and a crash between two posts re-posts at most the one in flight. A muted incident posts
nothing while the mute runs; once it ends, what is still due is posted (an incident still open
that was never posted opens then; one posted open that resolved meanwhile resolves then).

The body is Slack-compatible (`text` and `blocks`, which Slack, Mattermost and Rocket.Chat
render) and carries the incident itself as data (`event`, `incident`, `owner`) for any other
receiver. Every text from the watched systems goes into the blocks inert (`textsafe.slack_code`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from poisonwatch import textsafe
from poisonwatch.alerts.mutes import GROUP_PREFIX, mute_of
from poisonwatch.alerts.screen import print_by_severity
from poisonwatch.alerts.webhook import open_ledger, post_json, read_ledger, redact
from poisonwatch.config import PoisonwatchError

MART_DATABASE = "poisonwatch"


def load_incidents(engine: Any, kinds: list[str] | None = None) -> list[dict[str, Any]]:
    """Every row of the mart alert_incidents (open, quiet, recently resolved), newest first."""
    if not engine.table_exists(MART_DATABASE, "alert_incidents"):
        raise PoisonwatchError(
            "the mart poisonwatch.alert_incidents does not exist yet: run `dbt build`"
        )
    columns, rows = engine.query(
        f"select * from `{MART_DATABASE}`.`alert_incidents` order by last_seen_at desc, incident_id"
    )
    incidents = [dict(zip(columns, row, strict=True)) for row in rows]
    return [i for i in incidents if not kinds or i["alert_kind"] in kinds]


# The columns that say what an incident is about (its id adds when it began).
KEY_COLUMNS = (
    "alert_kind",
    "broker_kind",
    "server_name",
    "database_name",
    "broker_name",
    "queue_name",
    "consumer_id",
    "failure_group_id",
)
# The ledger of the webhook before incidents: one line per alert id posted. An incident's id is
# its first alert's id, so those lines say which incidents were already posted open.
LEGACY_LEDGER = "webhook_posted.jsonl"


def incident_key(incident: dict[str, Any]) -> str:
    """Kind and subject, without time: the same for every incident of one subject."""
    return json.dumps([incident.get(c) for c in KEY_COLUMNS])


def posts_by_incident(ledger: Path) -> dict[str, list[dict[str, Any]]]:
    """The ledger's posts per incident id, in the order they were made (a store that has only
    the alert ledger of before: its posted alerts as opened, resolved ones as resolved)."""
    posts: dict[str, list[dict[str, Any]]] = defaultdict(list)
    legacy = ledger.with_name(LEGACY_LEDGER)
    if not ledger.exists() and legacy.exists():
        for entry in read_ledger(legacy):
            if isinstance(entry.get("alert_id"), str):
                event = "resolved" if entry.get("status") == "resolved" else "opened"
                posts[entry["alert_id"]].append({"event": event, "severity": None})
    for entry in read_ledger(ledger):  # a cut line: posted again
        if isinstance(entry.get("incident_id"), str) and isinstance(entry.get("event"), str):
            posts[entry["incident_id"]].append(entry)
    return posts


def due_event(incident: dict[str, Any], posts: list[dict[str, Any]]) -> str | None:
    """The post this incident needs now, given the posts made for it: `opened` for one open or
    quiet and never posted; `severity` for one posted whose severity is not the last posted;
    `resolved` for one posted open, now resolved, its resolution not yet posted. (`continued`:
    the incident went on under a new id, its opening posted under the old one.)"""
    events = [p["event"] for p in posts]
    status = incident["status"]
    if "opened" not in events and "continued" not in events:
        return "opened" if status in ("open", "quiet") else None
    if "resolved" in events:
        return None
    if status == "resolved":
        return "resolved"
    last = posts[-1].get("severity")
    if last is not None and incident["severity"] != last:
        return "severity"
    return None


def _open_elsewhere(made: dict[str, list[dict[str, Any]]], current: set[str]) -> dict[str, str]:
    """incident_key -> id, for incidents posted open, not resolved and no longer in the mart
    (the first such id of a key): those an incident of the same kind and subject carries on,
    when its first alert left the lookback, which moves its first_seen_at and so its id."""
    found: dict[str, str] = {}
    for old_id, posts in made.items():
        events = {p["event"] for p in posts}
        key = posts[-1].get("incident_key") if posts else None
        if (
            key is not None
            and old_id not in current
            and events & {"opened", "continued"}
            and "resolved" not in events
        ):
            found.setdefault(key, old_id)
    return found


def _when(value: Any) -> str:
    return value.strftime("%Y-%m-%d %H:%M UTC") if isinstance(value, datetime) else "-"


def payload(event: str, incident: dict[str, Any]) -> dict[str, Any]:
    """The webhook body for one event of one incident (Slack-compatible)."""
    code = textsafe.slack_code
    verb = {"opened": "opened", "severity": "changed severity", "resolved": "resolved"}[event]
    owner = incident.get("owner_team")
    headline = (
        f"[{str(incident['severity']).upper()}] {incident['alert_kind']} on "
        f"{code(incident.get('subject'), 120)} {verb}"
    )
    owned = f"owner {code(owner, 60)} {code(incident.get('owner_channel'), 60)}"
    fields = [
        f"*status*\n{incident['status']}",
        f"*alerts*\n{incident['alert_count']}",
        f"*first seen*\n{_when(incident['first_seen_at'])}",
        f"*last seen*\n{_when(incident['last_seen_at'])}",
    ]
    if incident.get("resolved_at") is not None:
        fields.append(f"*resolved*\n{_when(incident['resolved_at'])}")
    data = {k: v.isoformat() if isinstance(v, datetime) else v for k, v in incident.items()}
    return {
        "text": f"{headline}; {owned if owner else 'no owner'}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": headline}},
            {
                "type": "section",
                "fields": [{"type": "mrkdwn", "text": f} for f in fields],
            },
            {
                "type": "context",
                "elements": [
                    {"type": "mrkdwn", "text": owned if owner else "no owner"},
                    {"type": "mrkdwn", "text": code(incident.get("detail"), 300)},
                ],
            },
        ],
        "unfurl_links": False,
        "unfurl_media": False,
        "event": event,
        "incident": data,
        "owner": {"team": owner, "channel": incident.get("owner_channel")},
    }


def post_incident_events(
    incidents: list[dict[str, Any]],
    url: str,
    ledger: Path,
    mutes: dict[tuple[str, str], dict[str, Any]],
    timeout: float = 10.0,
) -> tuple[list[str], list[str]]:
    """POST each incident's due event (opened, severity, resolved) unless a mute covers it;
    returns (posted `incident_id#event`, error messages). Each post ends within `timeout`
    seconds, answered or not; a refused one is due again next run."""
    if not url.startswith(("http://", "https://")):
        raise PoisonwatchError(f"--webhook must be an http:// or https:// URL, got {redact(url)}")
    shown = redact(url)
    made = posts_by_incident(ledger)
    elsewhere = _open_elsewhere(made, {str(i["incident_id"]) for i in incidents})
    posted: list[str] = []
    errors: list[str] = []
    for incident in incidents:
        incident_id = str(incident["incident_id"])
        key = incident_key(incident)
        if not made[incident_id] and key in elsewhere:
            old_id = elsewhere.pop(key)
            carried = {
                "incident_id": incident_id,
                "incident_key": key,
                "event": "continued",
                "from": old_id,
                "severity": made.pop(old_id)[-1].get("severity"),
            }
            with open_ledger(ledger) as fh:
                fh.write(json.dumps(carried) + "\n")
            made[incident_id].append(carried)
        event = due_event(incident, made[incident_id])
        if event is None or mute_of(incident, mutes) is not None:
            continue
        body = json.dumps(payload(event, incident), default=str, sort_keys=True)
        problem = post_json(url, textsafe.json_text(body).encode("utf-8"), timeout)
        if problem is not None:
            errors.append(f"{incident_id}: {shown}: {problem}")
            continue
        entry = {
            "incident_id": incident_id,
            "incident_key": key,
            "event": event,
            "severity": incident["severity"],
            "posted_at": datetime.now().astimezone().isoformat(),
            "url": shown,
        }
        with open_ledger(ledger) as fh:
            fh.write(json.dumps(entry) + "\n")
        made[incident_id].append(entry)
        posted.append(f"{incident_id}#{event}")
    return posted, errors


def lifecycle(
    incidents: list[dict[str, Any]],
    ledger: Path,
    mutes: dict[tuple[str, str], dict[str, Any]],
) -> list[dict[str, Any]]:
    """Each incident with its mute (until, reason) and the posts made for it."""
    made = posts_by_incident(ledger)
    out = []
    for incident in incidents:
        running = mute_of(incident, mutes)
        out.append(
            {
                **incident,
                "muted": None
                if running is None
                else {"until": running["until"], "reason": running["reason"]},
                "posts": [
                    {k: p.get(k) for k in ("event", "severity", "posted_at", "from")}
                    for p in made[str(incident["incident_id"])]
                ],
            }
        )
    return out


def print_incidents(incidents: list[dict[str, Any]], console: Console | None = None) -> None:
    """One entry per incident within 80 columns: severity, kind, subject, status, alerts and
    owner, then mute and detail under it (texts made inert)."""
    entries = []
    for i in incidents:
        when = {
            "open": f"open since {_when(i['first_seen_at'])}",
            "quiet": f"quiet since {_when(i['last_seen_at'])}",
        }.get(i["status"], f"resolved at {_when(i.get('resolved_at'))}")
        subject = str(i.get("subject") or "-")
        if subject == i.get("failure_group_id"):
            subject = f"group {subject[:GROUP_PREFIX]}"
        head = (
            f"[bold]{i['alert_kind']}[/bold] {textsafe.terminal(subject)} "
            f"({when}, {i['alert_count']} alert(s))"
        )
        owner = " ".join(str(i[k]) for k in ("owner_team", "owner_channel") if i.get(k))
        lines = [head, "owner " + textsafe.terminal(owner or "-")]
        if i.get("muted"):
            lines.append(
                f"[yellow]muted until {textsafe.terminal(i['muted']['until'])}: "
                f"{textsafe.terminal(i['muted']['reason'], limit=120)}[/yellow]"
            )
        lines.append(textsafe.terminal(i.get("detail"), limit=240))
        entries.append((i["severity"], "\n".join(lines)))
    print_by_severity(entries, "no incidents", console)
