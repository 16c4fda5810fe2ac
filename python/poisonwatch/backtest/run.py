"""Build the backtest marts and print, per queue and per consumer setting, the candidates side by
side with a recommendation and the seed change that would adopt it."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table

from poisonwatch import textsafe
from poisonwatch.backtest.candidates import insert_statement, load_candidates
from poisonwatch.config import PoisonwatchError

MART_DATABASE = "poisonwatch"
POLICY_DATABASE = "poisonwatch_policy"
MODELS = (
    "int_policy_candidates_resolved int_message_failures_accumulated "
    "policy_backtest breaker_backtest error_class_evidence"
)
SEEDS = {"policy": "candidate_policies", "breaker": "candidate_consumer_policies"}


@dataclass
class BacktestResult:
    """The marts' rows (as dicts) and the policy in force per queue."""

    policies: list[dict[str, Any]] = field(default_factory=list)
    breakers: list[dict[str, Any]] = field(default_factory=list)
    in_force: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    evidence: list[dict[str, Any]] = field(default_factory=list)
    label_problems: list[str] | None = None


def _rows(engine: Any, statement: str) -> list[dict[str, Any]]:
    columns, rows = engine.query(statement)
    return [dict(zip(columns, row, strict=True)) for row in rows]


def run_backtest(
    target: str | None = None,
    candidate_files: list[Path] | None = None,
    labels: Path | None = None,
) -> BacktestResult:
    """Load the candidates (a file replaces its seed until the next `dbt seed` / build), build
    the backtest marts with dbt and read them; with `labels`, check them against a generator's
    ground truth (backtest/labels.py)."""
    from poisonwatch.backtest.labels import check_against_labels
    from poisonwatch.warehouse.dbtrun import run_dbt
    from poisonwatch.warehouse.engine import connect

    loaded = [load_candidates(Path(p)) for p in candidate_files or []]
    kinds = [kind for kind, _ in loaded]
    if len(set(kinds)) != len(kinds):
        raise PoisonwatchError("give at most one failure-policy and one breaker candidate file")
    with connect(target) as engine:
        if not engine.table_exists(MART_DATABASE, "poison_messages"):
            raise PoisonwatchError("the marts do not exist yet: run `dbt build` first")
        seeds = [SEEDS[k] for k in SEEDS if k not in kinds]
        if seeds:
            run_dbt(["seed", "--select", *seeds], target=target)
        for kind, rows in loaded:
            engine.execute(insert_statement(f"`{POLICY_DATABASE}`.`{SEEDS[kind]}`", kind, rows))
        run_dbt(["run", "--select", *MODELS.split()], target=target)
        result = BacktestResult(
            policies=_rows(
                engine,
                f"select * from `{MART_DATABASE}`.`policy_backtest` "
                "order by broker_kind, queue_name, candidate_name",
            ),
            breakers=_rows(
                engine,
                f"select * from `{MART_DATABASE}`.`breaker_backtest` "
                "order by consumer_id, candidate_name",
            ),
            evidence=_rows(
                engine,
                f"select * from `{MART_DATABASE}`.`error_class_evidence` "
                "order by broker_kind, error_key, normalized_message",
            ),
        )
        for row in _rows(engine, "select * from `poisonwatch_intermediate`.`int_queue_policies`"):
            result.in_force[(row["broker_kind"], row["queue_name"])] = row
        if labels is not None:
            result.label_problems = check_against_labels(engine, labels)
    return result


def _num(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _setting(value: Any) -> str:
    if value is None:
        return "blank"
    return str(value).lower() if isinstance(value, bool) else str(value)


def policy_change(best: dict[str, Any], in_force: dict[str, Any] | None) -> str:
    """What to change in seeds/failure_policies.csv to adopt `best` for its queue."""
    keys = (
        "failure_threshold",
        "max_delivery_attempts",
        "permanent_error_threshold",
        "validation_is_poison",
    )
    if best["candidate_name"] == "current" or (
        in_force is not None and all(best[k] == in_force.get(k) for k in keys)
    ):
        return "change: none, keep seeds/failure_policies.csv (the policy in force is the best)"
    shown = (
        ("failure_threshold", "max_delivery_attempts")[best["broker_kind"] == "jms"],
        "permanent_error_threshold",
        "validation_is_poison",
    )
    settings = ", ".join(f"{k} {_setting(best[k])}" for k in shown)
    scope = "" if in_force is None else f" (now {in_force.get('policy_name')})"
    return (
        f"change: in seeds/failure_policies.csv give queue {best['broker_kind']}/"
        f"{best['queue_name']} its own row{scope} with {settings}; other columns as its "
        "current row"
    )


def breaker_change(best: dict[str, Any], current: dict[str, Any] | None) -> str:
    """What to change in seeds/consumer_policies.csv to adopt `best` for its consumer."""
    if best["candidate_name"] == "current" or (
        current is not None
        and best["max_consecutive_failures"] == current["max_consecutive_failures"]
        and best["breaker_mode"] == current["breaker_mode"]
    ):
        return "change: none, keep seeds/consumer_policies.csv (the setting in force is the best)"
    return (
        f"change: in seeds/consumer_policies.csv give {best['consumer_id']} its own row with "
        f"max_consecutive_failures {best['max_consecutive_failures']}, breaker_mode "
        f"{best['breaker_mode']} (keep its scheduled_group)"
    )


def _grouped(rows: list[dict[str, Any]], key: tuple[str, ...]) -> dict[tuple[Any, ...], list]:
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row[k] for k in key), []).append(row)
    return groups


def print_backtest(result: BacktestResult, console: Console | None = None) -> None:
    """Per queue and per consumer: the candidates side by side, a recommendation, the change."""
    console = console or Console(width=80)
    queues = _grouped(result.policies, ("broker_kind", "queue_name"))
    for (broker_kind, queue), rows in queues.items():
        failed = rows[0]["messages_with_failures"] if rows else 0
        table = Table(
            title=textsafe.terminal(f"{broker_kind} queue {queue}: {failed} failed messages"),
            box=box.SIMPLE_HEAD,
            title_justify="left",
        )
        # "* " and the longest shipped name (26); the seven columns stay within 80
        table.add_column("candidate", overflow="fold", min_width=28, max_width=28)
        for name in ("caught", "false", "missed", "waste", "p95", "disab."):
            table.add_column(name, justify="right")
        for row in rows:
            disables = (
                f"{row['queue_disables_prevented']}/{row['queue_disables']}"
                if row["queue_disables"] is not None
                else "-"
            )
            table.add_row(
                ("* " if row["is_recommended"] else "") + textsafe.terminal(row["candidate_name"]),
                _num(row["caught"]),
                _num(row["false_poison"]),
                _num(row["missed"]),
                _num(row["wasted_attempts_mean"]),
                _num(row["wasted_attempts_p95"]),
                disables,
            )
        console.print(table)
        best = next((r for r in rows if r["is_recommended"]), None)
        if best is None:
            console.print(
                "  recommendation: none — every candidate declares poison a message that later "
                "recovered (false > 0)"
            )
        else:
            console.print(
                f"  recommendation: {textsafe.terminal(best['candidate_name'])} — fewest wasted "
                f"attempts ({_num(best['wasted_attempts_mean'])} on average) with no false poison"
            )
            change = policy_change(best, result.in_force.get((broker_kind, queue)))
            console.print("  " + textsafe.terminal(change))
        console.print()
    for (consumer,), rows in _grouped(result.breakers, ("consumer_id",)).items():
        table = Table(
            title=textsafe.terminal(f"consumer {consumer}"),
            box=box.SIMPLE_HEAD,
            title_justify="left",
        )
        table.add_column("candidate", overflow="fold", max_width=20)
        for name in ("mode", "M", "trips", "perm.", "early", "spent", "waste"):
            table.add_column(name, justify="right")
        for row in rows:
            table.add_row(
                ("* " if row["is_recommended"] else "") + textsafe.terminal(row["candidate_name"]),
                row["breaker_mode"],
                _num(row["max_consecutive_failures"]),
                _num(row["trips"]),
                _num(row["trips_on_permanent_runs"]),
                _num(row["premature_trips"]),
                _num(row["failed_deliveries_before_trips"]),
                _num(row["wasted_deliveries"]),
            )
        console.print(table)
        best = next((r for r in rows if r["is_recommended"]), None)
        current = next((r for r in rows if r["candidate_name"] == "current"), None)
        if best is None:
            console.print("  recommendation: none — every candidate trips on a run that recovered")
        else:
            console.print(
                f"  recommendation: {textsafe.terminal(best['candidate_name'])} — no premature "
                f"trip, {_num(best['wasted_deliveries'])} deliveries wasted on permanent failures"
            )
            console.print("  " + textsafe.terminal(breaker_change(best, current)))
        console.print()
    print_evidence(result.evidence, console)
    console.print(
        "caught / false / missed: messages declared poison that never / later recovered, and "
        "never-recovered ones not declared; waste, p95: failed attempts spent before the "
        "decision; disab.: Service Broker queue disables prevented / seen. Breakers: trips, on "
        "permanent-only runs (perm.), premature (early: the run later recovered), failed "
        "deliveries before the trips (spent), on permanent runs not spared (waste). * = "
        "recommended."
    )


def error_class_change(row: dict[str, Any]) -> str:
    """What to change in seeds/error_classes.csv to adopt the evidence's class for an error."""
    verb = "add the row" if row["seed_failure_class"] == "unknown" else "set"
    return (
        f"change: in seeds/error_classes.csv {verb} {row['broker_kind']},{row['error_key']},"
        f"{row['recommended_class']}"
    )


def print_evidence(rows: list[dict[str, Any]], console: Console) -> None:
    """Error signatures whose evidence contradicts seeds/error_classes.csv, each with the seed
    change and what it would save; one line for the others."""
    recommended = [r for r in rows if r["is_reclassification_recommended"]]
    judged = sum(1 for r in rows if r["evidence_class"] is not None)
    console.print(
        f"error classes from evidence: {len(rows)} error signatures, {judged} with evidence "
        f"either way, {len(recommended)} contradicting seeds/error_classes.csv"
    )
    changes = {(r["broker_kind"], r["error_key"]): r for r in recommended}  # the last row of each
    for row in recommended:
        share = 100 * row["success_share"]
        what = (
            f"{row['attempts_saved']} failed attempts saved"
            if row["recommended_class"] == "permanent"
            else f"{row['false_poison_avoided']} messages not declared poison that recovered"
        )
        console.print(
            textsafe.terminal(
                f'  {row["broker_kind"]} {row["error_key"]} "{row["normalized_message"][:60]}": '
                f"{row['seed_failure_class']} in the seed, {row['failure_count']} failures on "
                f"{row['message_count']} messages, {share:.0f} % followed by a success → "
                f"{row['recommended_class']}; {what}"
            )
        )
        # The seed keys on the error: its change once, after the error's last signature.
        if changes[(row["broker_kind"], row["error_key"])] is row:
            console.print("    " + textsafe.terminal(error_class_change(row)))
    console.print()
