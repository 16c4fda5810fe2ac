"""Checks `error_class_evidence` on the demo's store against an independent derivation from the
landing files (reference_rules.error_evidence), signature by signature: the counts, the class
the evidence gives and the recommendation.

    python python/tests/support/evidence_check.py LANDING EVIDENCE.json

EVIDENCE.json is `poisonwatch sql "select * from poisonwatch.error_class_evidence" --format
json`. At least one signature must have evidence either way, or the check proves nothing.
Exits 1 with the differences.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

# Run as a script from scripts/test.sh: python/tests on the path, for `support`.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from support.alert_steps import load
from support.reference_rules import error_evidence

ROOT = Path(__file__).resolve().parents[3]
COMPARED = (
    "seed_failure_class",
    "failure_count",
    "message_count",
    "failures_followed_by_success",
    "recovered_message_count",
    "evidence_class",
    "recommended_class",
    "attempts_saved",
    "false_poison_avoided",
)
# Fractions compared to a millionth (Spark's doubles against Python's).
APPROXIMATE = ("success_share", "attempts_to_success_mean", "seconds_to_success_median")


def project_vars() -> tuple[int, float]:
    """The evidence thresholds as dbt_project.yml sets them."""
    values = yaml.safe_load((ROOT / "dbt_project.yml").read_text(encoding="utf-8"))["vars"]
    return int(values["error_evidence_min_messages"]), float(
        values["error_evidence_transient_share"]
    )


def _differ(got: Any, want: Any) -> bool:
    if got is None or want is None:
        return got is not want
    return abs(float(got) - float(want)) > 1e-6 * max(1.0, abs(float(want)))


def compare(mart: list[dict[str, Any]], expected: dict[tuple[str, str, str], dict]) -> list[str]:
    """Differences between the mart's rows and the reference's, by signature."""
    got = {(r["broker_kind"], r["error_key"], r["normalized_message"]): r for r in mart}
    problems = [f"missing from the mart: {k}" for k in sorted(set(expected) - set(got))]
    problems += [f"not in the landing files: {k}" for k in sorted(set(got) - set(expected))]
    for key in sorted(set(got) & set(expected)):
        for column in (*COMPARED, *APPROXIMATE):
            got_value, want = got[key][column], expected[key][column]
            if column in APPROXIMATE and not _differ(got_value, want):
                continue
            if got_value != want:
                problems.append(f"{key}: {column} is {got_value!r}, expected {want!r}")
    if not any(v["evidence_class"] for v in expected.values()):
        problems.append("no signature has evidence either way: the check would prove nothing")
    return problems


def main(argv: list[str]) -> int:
    landing, evidence = Path(argv[0]), Path(argv[1])
    mart = load(evidence)
    min_messages, share = project_vars()
    expected = error_evidence(landing, ROOT / "seeds", min_messages, share)
    problems = compare(mart, expected)
    for problem in problems:
        print(problem)
    judged = sum(1 for v in expected.values() if v["evidence_class"])
    recommended = sum(1 for v in expected.values() if v["recommended_class"])
    print(
        f"error_class_evidence: {len(mart)} signatures, {judged} with evidence either way, "
        f"{recommended} recommended for reclassification; {len(problems)} difference(s)"
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
