"""`poisonwatch demo`: the main job on the current target, end to end, with a short summary.

generate → ingest → dbt build → poison summary (+ agreement with the generator's labels)
→ plan → apply → dbt build → before/after.
"""

from __future__ import annotations

import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from poisonwatch.config import home
from poisonwatch.warehouse.engine import Engine, connect

console = Console()


def _step(title: str) -> float:
    console.rule(f"[bold]{title}")
    return time.monotonic()


def _done(start: float) -> None:
    console.print(f"[dim]… {time.monotonic() - start:.1f} s[/dim]")


def poison_summary(engine: Engine) -> dict[str, list[tuple]]:
    """Counts by classification and reason, tripped consumers, disabled queues."""
    _, by_class = engine.query(
        "select broker_kind, classification, reason, count(*) as messages, "
        "count_if(is_live) as live from poisonwatch.poison_messages "
        "group by 1, 2, 3 order by 1, 2, 3"
    )
    _, tripped = engine.query(
        "select consumer_id, trip_reason, reporting_server_count "
        "from poisonwatch.consumer_circuit_breakers where is_tripped order by 1"
    )
    _, disabled = engine.query(
        "select server_name, database_name, queue_name, disable_risk, is_observed_disabled "
        "from poisonwatch.queue_health where is_latest_snapshot and is_disabled order by 1, 2, 3"
    )
    return {"by_class": by_class, "tripped": tripped, "disabled": disabled}


def print_poison_summary(summary: dict[str, list[tuple]]) -> None:
    table = Table(title="Messages that failed at least once")
    for col in ("broker", "classification", "reason", "messages", "still live"):
        table.add_column(col, justify="right" if col in ("messages", "still live") else "left")
    for row in summary["by_class"]:
        table.add_row(*(str(v) for v in row))
    console.print(table)
    table = Table(title="Tripped circuit breakers")
    for col in ("consumer", "reason", "reporting servers"):
        table.add_column(col)
    for row in summary["tripped"]:
        table.add_row(*(str(v) for v in row))
    console.print(table)
    table = Table(title="Disabled Service Broker queues")
    for col in ("server", "database", "queue", "risk", "observed"):
        table.add_column(col)
    for row in summary["disabled"]:
        table.add_row(*(str(v) for v in row))
    console.print(table)


def run_demo(
    landing: Path | None, seed: int = 42, attempts: int = 20_000, target: str | None = None
) -> None:
    """Run the whole loop on generated data and print what it found and did."""
    from poisonwatch.generate import generate
    from poisonwatch.ingest import ingest
    from poisonwatch.ingest import print_summary as print_ingest
    from poisonwatch.quality import compare_labels, print_label_report
    from poisonwatch.warehouse.dbtrun import run_dbt

    landing = landing or home() / "landing" / f"demo-seed{seed}-{attempts}"
    total = time.monotonic()
    if not (landing / "labels.jsonl").is_file():
        t = _step(f"generate {attempts} attempts (seed {seed}) into {landing}")
        generate(landing, seed=seed, attempts=attempts)
        _done(t)
    else:
        console.print(f"[dim]landing folder {landing} exists: reusing it[/dim]")

    with connect(target) as engine:
        t = _step("ingest")
        print_ingest(ingest(engine, landing))
        _done(t)

        t = _step("dbt build")
        run_dbt(["build"], target=target)
        _done(t)

        print_poison_summary(poison_summary(engine))
        report = compare_labels(engine, landing / "labels.jsonl")
        print_label_report(report)

        _remediate(engine, target)

    console.rule(f"[bold green]demo finished in {time.monotonic() - total:.0f} s")


def _live_counts(engine: Engine) -> dict[str, int]:
    """What an operator watches: live poison, live blocked messages, pending actions."""
    _, rows = engine.query(
        "select "
        "(select count(*) from poisonwatch.poison_messages "
        " where classification = 'poison' and is_live) as live_poison, "
        "(select coalesce(sum(blocked_message_count), 0) from poisonwatch.poison_conversations "
        " where is_live) as blocked, "
        "(select count(*) from poisonwatch.dlq_messages) as dlq, "
        "(select count(*) from poisonwatch.consumer_circuit_breakers "
        " where is_tripped and not is_disabled_by_apply) as tripped_not_disabled, "
        "(select count(*) from poisonwatch.remediation_actions "
        " where status = 'pending' and not requires_review) as pending_actions, "
        "(select count(*) from poisonwatch.remediation_actions "
        " where status = 'applied') as applied_actions"
    )
    names = (
        "live poison messages",
        "messages blocked behind poison",
        "dlq_messages rows",
        "tripped consumers not yet disabled",
        "pending actions (applicable)",
        "applied actions",
    )
    return dict(zip(names, (int(v or 0) for v in rows[0]), strict=True))


def _remediate(engine: Engine, target: str | None) -> None:
    """plan → apply → dbt build, and the before/after an operator cares about."""
    from poisonwatch.remediation import (
        ApplyLock,
        Filters,
        apply_actions,
        load_pending,
        print_plan,
        print_result,
    )
    from poisonwatch.warehouse.dbtrun import run_dbt

    before = _live_counts(engine)
    t = _step("plan")
    print_plan(load_pending(engine, Filters()), console)
    _done(t)

    t = _step("apply --yes")
    lock = ApplyLock()
    lock.acquire_file()
    try:
        result = apply_actions(engine, Filters(), yes=True, lock=lock, console=console)
    finally:
        lock.release()
    print_result(result, console)
    _done(t)

    t = _step("dbt build (after apply)")
    run_dbt(["build"], target=target)
    _done(t)

    after = _live_counts(engine)
    table = Table(title="Before and after remediation")
    for col in ("", "before", "after"):
        table.add_column(col, justify="left" if not col else "right")
    for name, value in before.items():
        table.add_row(name, str(value), str(after[name]))
    console.print(table)
