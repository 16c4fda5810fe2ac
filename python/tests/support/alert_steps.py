"""Checks the alert sequence of `make test` from `poisonwatch alerts --format json`, not from exit
codes alone: which kinds and subjects are open after the alert scenarios, and which of them are
resolved after the follow-up (generate --follow-up, ingest, build).

    python python/tests/support/alert_steps.py raised ALERTS.jsonl
    python python/tests/support/alert_steps.py resolved ALERTS.jsonl

The expected subjects come from the generator's own scenario constants, so a scenario that stops
firing (or fires on another subject) fails the step. Exits 1 with the differences.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from poisonwatch.generate.alert_scenarios import (
    FRAGILE_QUEUE,
    LOOPING_QUEUE,
    SPIKE_CONSUMER,
    STALLED_QUEUE,
    UNFUSED_CONSUMER,
)
from poisonwatch.generate.scenarios import INVENTORY_QUEUE

SPIKE_QUEUE = f"alerts.{SPIKE_CONSUMER.removeprefix('agent.')}"
NEW_ERROR = "error 8645:"

# (kind, subject) that must be open once the scenarios ran; the subject is the alert's queue,
# consumer or, for a failure group, the start of its detail.
RAISED = {
    ("queue_disabled", INVENTORY_QUEUE),
    ("queue_disable_imminent", FRAGILE_QUEUE),
    ("queue_loops_forever", LOOPING_QUEUE),
    ("dlq_arrival_spike", SPIKE_QUEUE),
    ("queue_stalled", STALLED_QUEUE),
    ("new_failure_group", NEW_ERROR),
}
# Fired, open or already resolved: the demo's apply disables the unfused consumer, which ends
# the breaker alert before the step reads the mart.
FIRED = {("breaker_tripped_still_receiving", UNFUSED_CONSUMER)}
# What the follow-up remediates: these must be resolved (present, not open) afterwards, and no
# alert of these kinds may be open at all (the looping queue's poison message was ended).
RESOLVED = {
    ("dlq_arrival_spike", SPIKE_QUEUE),
    ("queue_stalled", STALLED_QUEUE),
    ("queue_loops_forever", LOOPING_QUEUE),
}


def subject(alert: dict[str, Any]) -> str:
    if alert["alert_kind"] == "new_failure_group":
        detail = str(alert.get("detail") or "")
        return NEW_ERROR if detail.startswith(NEW_ERROR) else detail[:40]
    return str(alert.get("queue_name") or alert.get("consumer_id") or "")


def load(path: Path) -> list[dict[str, Any]]:
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [json.loads(line) for line in lines]


def check_raised(alerts: list[dict[str, Any]]) -> list[str]:
    open_ = {(a["alert_kind"], subject(a)) for a in alerts if a["status"] == "open"}
    problems = [f"not open: {kind} on {subj}" for kind, subj in sorted(RAISED - open_)]
    seen = {(a["alert_kind"], subject(a)) for a in alerts}
    problems += [f"never fired: {kind} on {subj}" for kind, subj in sorted(FIRED - seen)]
    if not any(a["status"] == "open" and a["severity"] == "critical" for a in alerts):
        problems.append("no critical alert is open")
    return problems


def check_resolved(alerts: list[dict[str, Any]]) -> list[str]:
    problems = []
    status = {(a["alert_kind"], subject(a)): a["status"] for a in alerts}
    for kind, subj in sorted(RESOLVED):
        got = status.get((kind, subj))
        if got != "resolved":
            problems.append(f"{kind} on {subj}: {got or 'absent'}, expected resolved")
    kinds = {kind for kind, _ in RESOLVED}
    still = sorted({(a["alert_kind"], subject(a)) for a in alerts if a["status"] == "open"})
    problems += [f"still open: {k} on {s}" for k, s in still if k in kinds]
    return problems


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("raised", "resolved"):
        print(__doc__, file=sys.stderr)
        return 2
    alerts = load(Path(argv[1]))
    problems = (check_raised if argv[0] == "raised" else check_resolved)(alerts)
    for line in problems:
        print(f"alert_steps {argv[0]}: {line}")
    if not problems:
        print(f"alert_steps {argv[0]}: as expected ({len(alerts)} alerts in the mart)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
