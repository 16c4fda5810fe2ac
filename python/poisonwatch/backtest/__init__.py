"""`poisonwatch backtest`: history replayed under candidate policies, and a recommendation.

Owns reading and validating candidate files (`candidates`), building the marts
`policy_backtest` and `breaker_backtest` and choosing and printing a recommendation per queue and
per consumer setting (`run`). May import `poisonwatch.config`, `poisonwatch.textsafe` and
`poisonwatch.warehouse`; other jobs use only what is exported here.
"""

from poisonwatch.backtest.candidates import (
    BREAKER_COLUMNS,
    POLICY_COLUMNS,
    load_candidates,
)
from poisonwatch.backtest.run import BacktestResult, print_backtest, run_backtest

__all__ = [
    "BREAKER_COLUMNS",
    "POLICY_COLUMNS",
    "BacktestResult",
    "load_candidates",
    "print_backtest",
    "run_backtest",
]
