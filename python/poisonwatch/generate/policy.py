"""The policy seeds (`seeds/*.csv`) as the generator reads them, and the rules of docs/rules.md
applied to one message's running state. The generator labels with these; tests re-derive the
labels independently (python/tests/support/reference_rules.py).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from poisonwatch.config import project_root, project_var

CLASS_RANK = {"transient": 0, "unknown": 1, "permanent": 2, "validation": 3}


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _int_or_none(text: str) -> int | None:
    return int(text) if text.strip() else None


@dataclass(frozen=True)
class FailurePolicy:
    failure_threshold: int | None
    max_delivery_attempts: int | None
    permanent_error_threshold: int | None
    validation_is_poison: bool


@dataclass(frozen=True)
class ConsumerPolicy:
    max_consecutive_failures: int
    breaker_mode: str
    scheduled_group: str | None

    @property
    def same_type_threshold(self) -> int:
        return self.max_consecutive_failures // 3


@dataclass
class Policies:
    failure: dict[tuple[str, str], FailurePolicy] = field(default_factory=dict)
    error_classes: dict[tuple[str, str], str] = field(default_factory=dict)
    consumers: dict[str, ConsumerPolicy] = field(default_factory=dict)
    disposable: set[tuple[str, str, str]] = field(default_factory=set)

    def failure_policy(self, broker_kind: str, queue_name: str) -> FailurePolicy:
        return self.failure.get((broker_kind, queue_name)) or self.failure[(broker_kind, "*")]

    def error_class(self, broker_kind: str, key: str) -> str:
        return self.error_classes.get((broker_kind, key), "unknown")

    def consumer(self, consumer_id: str) -> ConsumerPolicy:
        return self.consumers.get(consumer_id) or self.consumers["*"]

    def is_disposable(self, broker_kind: str, queue_name: str, message_type: str) -> bool:
        return (broker_kind, queue_name, message_type) in self.disposable or (
            broker_kind,
            "*",
            message_type,
        ) in self.disposable


def load_policies(seeds_dir: Path | None = None) -> Policies:
    """Read the four policy seeds from `seeds_dir` (default: the project's `seeds/`)."""
    d = seeds_dir or project_root() / "seeds"
    p = Policies()
    for r in _rows(d / "failure_policies.csv"):
        p.failure[(r["broker_kind"], r["queue_name"])] = FailurePolicy(
            failure_threshold=_int_or_none(r["failure_threshold"]),
            max_delivery_attempts=_int_or_none(r["max_delivery_attempts"]),
            permanent_error_threshold=_int_or_none(r["permanent_error_threshold"]),
            validation_is_poison=r["validation_is_poison"].strip().lower() == "true",
        )
    for r in _rows(d / "error_classes.csv"):
        p.error_classes[(r["broker_kind"], r["error_key"])] = r["failure_class"]
    for r in _rows(d / "consumer_policies.csv"):
        p.consumers[r["consumer_id"]] = ConsumerPolicy(
            max_consecutive_failures=int(r["max_consecutive_failures"]),
            breaker_mode=(
                r["breaker_mode"].strip() or str(project_var("default_breaker_mode"))
            ).upper(),
            scheduled_group=r["scheduled_group"].strip() or None,
        )
    for r in _rows(d / "disposable_message_types.csv"):
        p.disposable.add((r["broker_kind"], r["queue_name"], r["message_type_name"]))
    return p


def classify(
    policy: FailurePolicy,
    broker_kind: str,
    *,
    last_success: bool,
    classes: dict[str, int],
    failures: int,
    max_delivery_count: int,
    disposable: bool,
) -> tuple[str, str]:
    """docs/rules.md "Classification": (classification, reason) of a message with ≥ 1 failure."""
    if last_success:
        return "recovered", "succeeded_after_failures"
    if classes.get("validation") and policy.validation_is_poison:
        return "poison", "invalid_content"
    pet = policy.permanent_error_threshold
    if pet is not None and classes.get("permanent", 0) >= pet:
        return "poison", "permanent_error"
    if disposable:
        return "poison", "disposable"
    if broker_kind == "service_broker":
        threshold = policy.failure_threshold
        if threshold is None:
            threshold = int(project_var("default_failure_threshold"))
        if failures > threshold:
            return "poison", "threshold_exceeded"
        if failures == threshold:
            return "suspect", "at_threshold"
        return "retrying", "below_threshold"
    mda = policy.max_delivery_attempts
    if mda is None:
        mda = int(project_var("default_max_delivery_attempts"))
    deliveries = max(failures, max_delivery_count)
    if deliveries >= mda:
        return "poison", "max_deliveries"
    if deliveries == mda - 1:
        return "suspect", "at_threshold"
    return "retrying", "below_threshold"


def worst_class(classes: dict[str, int]) -> str | None:
    best = None
    for name in classes:
        if best is None or CLASS_RANK[name] > CLASS_RANK[best]:
            best = name
    return best
