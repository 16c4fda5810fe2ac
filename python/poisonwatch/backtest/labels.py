"""The backtest against a generator's ground truth (`poisonwatch backtest --labels FILE`).

Two checks per queue: candidate `current` catches exactly the messages `poison_messages` and the
labels call poison (the replay and the live classification are one rule); candidate
`first_failure` (poison at the first failure) shows every message that failed and then recovered
(label `recovered`) as false poison. Generated histories never fail again after a recovery, so
"no later success" and "last attempt not a success" agree there.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from poisonwatch.config import PoisonwatchError


def _label_counts(path: Path) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    poison: Counter[tuple[str, str]] = Counter()
    recovered: Counter[tuple[str, str]] = Counter()
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise PoisonwatchError(f"{path}: cannot read the labels ({exc})") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            label = json.loads(line)
        except ValueError:
            raise PoisonwatchError(f"{path}, line {number}: not a JSON object") from None
        if label.get("kind") != "message":
            continue
        key = (label["broker_kind"], label["queue_name"])
        if label["classification"] == "poison":
            poison[key] += 1
        elif label["classification"] == "recovered":
            recovered[key] += 1
    return poison, recovered


def check_against_labels(engine: Any, labels: Path) -> list[str]:
    """Disagreements (empty when the backtest agrees with the marts and the labels)."""
    poison_labels, recovered_labels = _label_counts(labels)
    _, rows = engine.query(
        "select broker_kind, queue_name, candidate_name, caught, false_poison "
        "from `poisonwatch`.`policy_backtest` "
        "where candidate_name in ('current', 'first_failure')"
    )
    backtest = {(r[0], r[1], r[2]): (r[3], r[4]) for r in rows}
    _, rows = engine.query(
        "select broker_kind, queue_name, count_if(classification = 'poison') "
        "from `poisonwatch`.`poison_messages` group by broker_kind, queue_name"
    )
    live = {(r[0], r[1]): r[2] for r in rows}
    problems = []
    queues = {(k[0], k[1]) for k in backtest} | set(live) | set(poison_labels)
    for queue in sorted(queues):
        caught, _ = backtest.get((*queue, "current"), (0, 0))
        if not caught == live.get(queue, 0) == poison_labels.get(queue, 0):
            problems.append(
                f"{queue[0]}/{queue[1]}: current catches {caught}, poison_messages has "
                f"{live.get(queue, 0)} poison, the labels {poison_labels.get(queue, 0)}"
            )
        if (*queue, "first_failure") in backtest:
            false_poison = backtest[(*queue, "first_failure")][1]
            if false_poison != recovered_labels.get(queue, 0):
                problems.append(
                    f"{queue[0]}/{queue[1]}: first_failure has {false_poison} false poison, the "
                    f"labels {recovered_labels.get(queue, 0)} recovered messages"
                )
    if not any(k[2] == "first_failure" for k in backtest):
        problems.append("candidate first_failure is missing from policy_backtest")
    return problems
