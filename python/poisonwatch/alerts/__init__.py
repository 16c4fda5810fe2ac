"""`poisonwatch alerts`: what needs a person now, from the mart `alerts`.

Owns reading the mart, the monitoring-plugin exit code (0 none, 1 warning, 2 critical), the table
and JSON-lines output (`report`) and posting new alerts to a webhook exactly once per alert id,
with a ledger of what was posted (`webhook`). May import `poisonwatch.config`,
`poisonwatch.textsafe` and `poisonwatch.warehouse`; other jobs use only what is exported here.
"""

from poisonwatch.alerts.report import (
    ALERT_KINDS,
    exit_code,
    json_lines,
    load_alerts,
    parse_duration,
    print_alerts,
    run_alerts,
)
from poisonwatch.alerts.webhook import post_new_alerts

__all__ = [
    "ALERT_KINDS",
    "exit_code",
    "json_lines",
    "load_alerts",
    "parse_duration",
    "post_new_alerts",
    "print_alerts",
    "run_alerts",
]
