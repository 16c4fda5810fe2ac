"""`poisonwatch plan` / `apply` / `replay` / `resume`: remediation from `remediation_actions`,
exactly once.

Owns reading pending actions and writing the T-SQL script (`plan`), applying them with their
effects and the ledger (`apply`), turning paused queues back on (`resume`), and the ledger,
recovery and apply lock (`ledger`). May import `poisonwatch.config` and `poisonwatch.warehouse`;
other jobs use only what is exported here.
"""

from poisonwatch.remediation.apply import (
    ApplyResult,
    apply_actions,
    print_result,
    request_replay,
    run_apply,
)
from poisonwatch.remediation.ledger import ApplyLock
from poisonwatch.remediation.plan import Filters, Plan, load_pending, print_plan, run_plan
from poisonwatch.remediation.resume import Resumed, resume_queue

__all__ = [
    "ApplyLock",
    "ApplyResult",
    "Filters",
    "Plan",
    "Resumed",
    "apply_actions",
    "load_pending",
    "print_plan",
    "print_result",
    "request_replay",
    "resume_queue",
    "run_apply",
    "run_plan",
]
