"""`poisonwatch alerts`: what needs a person now, from the marts `alerts` and `alert_incidents`.

Owns reading the marts, the monitoring-plugin exit code (0 none, 1 warning, 2 critical), the table
and JSON-lines output (`report`), the incidents' lifecycle and their posts to a webhook, once per
opening, severity change and resolution, with a ledger of what was posted (`incidents`, over the
HTTP of `webhook`), operators' mutes (`mutes`) and the terminal listing (`screen`). May import
`poisonwatch.config`, `poisonwatch.textsafe` and `poisonwatch.warehouse`; other jobs use only what
is exported here.
"""

from poisonwatch.alerts.incidents import load_incidents, post_incident_events
from poisonwatch.alerts.mutes import active_mutes, now_utc
from poisonwatch.alerts.report import (
    ALERT_KINDS,
    exit_code,
    json_lines,
    ledger_path,
    load_alerts,
    mutes_path,
    parse_duration,
    print_alerts,
    run_alerts,
    run_mute,
)

__all__ = [
    "ALERT_KINDS",
    "active_mutes",
    "exit_code",
    "json_lines",
    "ledger_path",
    "load_alerts",
    "load_incidents",
    "mutes_path",
    "now_utc",
    "parse_duration",
    "post_incident_events",
    "print_alerts",
    "run_alerts",
    "run_mute",
]
