"""`poisonwatch generate --alert-scenario` / `--follow-up`: the scenarios come after the regular
traffic without changing it, their labels follow docs/rules.md, and the follow-up holds only the
later snapshot and the stalled queue's commits. No Spark here: the end-to-end flow (alerts raised,
then resolved) is a step of scripts/test.sh on the store it already builds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.reference_rules import derive_labels, read_dataset, read_labels, to_micros

from poisonwatch.config import project_root
from poisonwatch.generate import generate
from poisonwatch.generate.alert_scenarios import (
    ALERT_SCENARIOS,
    FRAGILE_QUEUE,
    SPIKE_MESSAGES,
    STALLED_MESSAGES,
    STALLED_QUEUE,
    UNFUSED_CONSUMER,
    check_kinds,
)

SEEDS_DIR = project_root() / "seeds"
ATTEMPTS = 1500


@pytest.fixture(scope="module")
def landings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("alert-scenarios")
    out = {"plain": root / "plain", "alerts": root / "alerts", "follow": root / "follow"}
    generate(out["plain"], seed=5, attempts=ATTEMPTS, chunk_records=1_000_000)
    generate(
        out["alerts"], seed=5, attempts=ATTEMPTS, chunk_records=1_000_000, alert_scenarios=["all"]
    )
    generate(
        out["follow"],
        seed=5,
        attempts=ATTEMPTS,
        chunk_records=1_000_000,
        alert_scenarios=["all"],
        follow_up=True,
    )
    return out


def _lines(landing: Path, dataset: str) -> list[str]:
    return (landing / dataset / "part-00000.jsonl").read_text(encoding="utf-8").splitlines()


def test_regular_traffic_is_unchanged_and_scenarios_follow(landings: dict[str, Path]) -> None:
    for dataset in ("ssb_receive_attempts", "jms_receive_attempts"):
        plain, flagged = _lines(landings["plain"], dataset), _lines(landings["alerts"], dataset)
        assert flagged[: len(plain)] == plain
        assert len(flagged) > len(plain)
        last_regular = max(to_micros(json.loads(x)["attempted_at"]) for x in plain)
        extra = [json.loads(x) for x in flagged[len(plain) :]]
        assert min(to_micros(r["attempted_at"]) for r in extra) > last_regular


def test_scenario_labels_follow_the_rules(landings: dict[str, Path]) -> None:
    folder = landings["alerts"]
    expected = derive_labels(folder, SEEDS_DIR)
    labels = read_labels(folder)
    assert labels == expected
    spike = [k for k in labels["message"] if "alerts.spike" in k]
    assert len(spike) == SPIKE_MESSAGES
    assert {labels["message"][k] for k in spike} == {("poison", "max_deliveries")}
    assert labels["consumer"][UNFUSED_CONSUMER][0] is True


def test_stalled_queue_piles_up_and_fragile_queue_is_at_four(landings: dict[str, Path]) -> None:
    snapshots = read_dataset(landings["alerts"], "ssb_queue_snapshots")
    depth: dict[int, int] = {}
    for row in snapshots:
        if row["queue_name"] == STALLED_QUEUE:
            at = to_micros(row["snapshot_at"])
            depth[at] = depth.get(at, 0) + 1
    series = [depth[t] for t in sorted(depth)]
    assert series == sorted(series) and series[-1] == STALLED_MESSAGES and series[0] < series[-1]
    fragile = [
        json.loads(x)
        for x in _lines(landings["alerts"], "ssb_receive_attempts")
        if f'"{FRAGILE_QUEUE}"' in x
    ]
    outcomes = [r["outcome"] for r in sorted(fragile, key=lambda r: r["attempted_at"])]
    assert outcomes[-4:] == ["rolled_back"] * 4 and outcomes[:-4] == ["committed"]


def test_follow_up_holds_only_what_comes_after(landings: dict[str, Path]) -> None:
    follow = landings["follow"]
    attempts = [json.loads(x) for x in _lines(follow, "ssb_receive_attempts")]
    stalled = [r for r in attempts if r["queue_name"] == STALLED_QUEUE]
    assert len(stalled) == STALLED_MESSAGES
    assert {r["outcome"] for r in attempts} == {"committed"}
    assert not (follow / "jms_receive_attempts").exists() or not any(
        (follow / "jms_receive_attempts").iterdir()
    )
    last_before = max(
        to_micros(r["snapshot_at"]) for r in read_dataset(landings["alerts"], "ssb_queue_states")
    )
    states = read_dataset(follow, "ssb_queue_states")
    assert states and min(to_micros(r["snapshot_at"]) for r in states) > last_before
    assert not [
        r for r in read_dataset(follow, "ssb_queue_snapshots") if r["queue_name"] == STALLED_QUEUE
    ]
    assert read_labels(follow) == read_labels(landings["alerts"])


def test_scenario_names_are_checked() -> None:
    assert check_kinds(["all"]) == list(ALERT_SCENARIOS)
    assert check_kinds(["queue_stalled", "dlq_arrival_spike"]) == [
        "dlq_arrival_spike",
        "queue_stalled",
    ]
    with pytest.raises(ValueError, match="unknown alert scenario 'queue_on_fire'"):
        check_kinds(["queue_on_fire"])
