"""`poisonwatch demo`: the main job on the current target, end to end, with a one-screen summary.

generate → ingest → dbt build → agreement with the generator's labels → plan → apply →
dbt build → report. Each step shows a live status line while it runs and leaves one line when it
is done; dbt's own log goes to a file. The closing summary (what was found, what was done, what
is left, the report's path and the next command) fits 40 lines of 80 columns.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.table import Table

from poisonwatch import textsafe
from poisonwatch.config import home
from poisonwatch.warehouse.engine import Engine, connect

console = Console()
T = TypeVar("T")


@dataclass
class DemoRun:
    """What the demo found and did, for the closing summary."""

    found: list[tuple[Any, ...]] = field(default_factory=list)
    at_risk: list[tuple[Any, ...]] = field(default_factory=list)
    tripped: list[tuple[Any, ...]] = field(default_factory=list)
    before: dict[str, int] = field(default_factory=dict)
    after: dict[str, int] = field(default_factory=dict)
    applied: dict[str, int] = field(default_factory=dict)
    labels_ok: bool | None = None
    rejected: int = 0
    report: Path | None = None

    @property
    def ok(self) -> bool:
        """Generated data loads without a reject and the marts agree with its labels."""
        return bool(self.labels_ok) and self.rejected == 0


@contextmanager
def _status(text: str) -> Iterator[None]:
    with console.status(f"[bold]{text}[/bold] …", spinner="dots"):
        yield


def _step(
    name: str, run: Callable[[], T], describe: Callable[[T], str], own_progress: bool = False
) -> T:
    """Run one step under a live status line (unless the step shows its own progress bar: rich
    allows one live display at a time), then print one line: name, result, seconds."""
    started = time.monotonic()
    if own_progress:
        value = run()
    else:
        with _status(name):
            value = run()
    seconds = time.monotonic() - started
    line = f"[green]✓[/green] {name:<10} {describe(value)}"
    console.print(f"{line}[dim] · {seconds:.0f} s[/dim]", highlight=False)
    return value


def found_summary(engine: Engine) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], list]:
    """Poison per broker, queues at risk or disabled, tripped breakers (small aggregates)."""
    _, per_broker = engine.query(
        "select broker_kind, count_if(classification = 'poison'), "
        "count_if(classification = 'poison' and is_live), "
        "count_if(classification in ('suspect', 'retrying')), count(*) "
        "from poisonwatch.poison_messages group by 1 order by 1"
    )
    _, at_risk = engine.query(
        "select coalesce(concat(server_name, '.', database_name), broker_name), queue_name, "
        "disable_risk, longest_rollback_run from poisonwatch.queue_health "
        "where is_latest_snapshot and disable_risk <> 'ok' "
        "order by disable_risk = 'disabled' desc, longest_rollback_run desc, 1, 2"
    )
    _, tripped = engine.query(
        "select consumer_id, trip_reason, reporting_server_count from "
        "poisonwatch.consumer_circuit_breakers where is_tripped order by 1"
    )
    return per_broker, at_risk, tripped


def live_counts(engine: Engine) -> dict[str, int]:
    """What an operator watches: live poison, blocked messages, breakers, actions."""
    _, rows = engine.query(
        "select "
        "(select count(*) from poisonwatch.poison_messages "
        " where classification = 'poison' and is_live), "
        "(select coalesce(sum(blocked_message_count), 0) from poisonwatch.poison_conversations "
        " where is_live), "
        "(select count(*) from poisonwatch.consumer_circuit_breakers "
        " where is_tripped and not is_disabled_by_apply and not is_paused_by_apply), "
        "(select count(*) from poisonwatch.remediation_actions "
        " where status = 'pending' and not requires_review), "
        "(select count(*) from poisonwatch.remediation_actions "
        " where status = 'pending' and requires_review)"
    )
    names = ("live poison", "blocked behind poison", "tripped, not disabled", "pending", "review")
    return dict(zip(names, (int(v or 0) for v in rows[0]), strict=True))


def run_demo(
    landing: Path | None,
    seed: int = 42,
    attempts: int = 20_000,
    target: str | None = None,
    report: Path | None = None,
    alert_scenarios: list[str] | None = None,
) -> DemoRun:
    """Run the whole loop on generated data and print what it found, did and left;
    `alert_scenarios` go to the generator (`generate --alert-scenario`)."""
    from poisonwatch.generate import generate
    from poisonwatch.ingest import ingest
    from poisonwatch.quality import compare_labels
    from poisonwatch.report import write_report
    from poisonwatch.warehouse.build import read_inputs, record_build
    from poisonwatch.warehouse.dbtrun import dbt_log_path, run_dbt

    landing = landing or home() / "landing" / f"demo-seed{seed}-{attempts}"
    total = time.monotonic()
    run = DemoRun()
    console.rule(f"[bold]poisonwatch demo[/bold] · seed {seed} · {attempts:,} attempts")
    if not (landing / "labels.jsonl").is_file():
        _step(
            "generate",
            lambda: generate(
                landing, seed=seed, attempts=attempts, alert_scenarios=alert_scenarios
            ),
            lambda s: f"{s.attempts_written:,} attempts in {len(s.files)} files",
        )
    else:
        console.print(f"[green]✓[/green] {'generate':<10} reusing {textsafe.terminal(landing)}")

    def dbt_build(label: str, *extra: str) -> Callable[[], int]:
        return lambda: run_dbt(
            ["build", *extra], target=target, console=console, label=label, quiet=True
        )

    with connect(target) as engine:
        ingested = _step(
            "ingest",
            lambda: ingest(engine, landing, console=console),
            lambda s: f"{s.records_loaded:,} records loaded, {s.rejected_total:,} rejected",
            own_progress=True,
        )
        run.rejected = ingested.rejected_total
        _step("dbt build", dbt_build("dbt build"), lambda n: f"{n} nodes ok", own_progress=True)
        labels = _step(
            "verify",
            lambda: compare_labels(engine, landing / "labels.jsonl"),
            lambda r: (
                "marts agree with the generator's labels"
                if r.ok
                else "[red]marts disagree with the labels[/red] (poisonwatch verify)"
            ),
        )
        run.labels_ok = labels.ok
        run.found, run.at_risk, run.tripped = found_summary(engine)
        run.before = live_counts(engine)
        result = _step("apply", lambda: _apply(engine), _describe_apply, own_progress=True)
        run.applied = dict(result.applied)
        # Only what apply's records feed (the ops staging views and everything downstream: the
        # marts), with their data tests; the attempt sequencing does not change.
        after_apply = [
            "--select",
            "path:models/staging/ops+",
            "--exclude-resource-type",
            "unit_test",
        ]
        covered = read_inputs(engine)
        _step(
            "dbt build",
            dbt_build("dbt build (after apply)", *after_apply),
            lambda n: f"{n} nodes ok (after apply)",
            own_progress=True,
        )
        # With the whole project's build before apply, this one covers every input read just
        # before it: a later `poisonwatch build` (or `serve`) skips until something new lands.
        record_build(target, covered, ["build", *after_apply])
        run.after = live_counts(engine)
        out = report or home() / "poisonwatch-report.html"
        written = _step(
            "report",
            lambda: write_report(engine, out),
            lambda r: (
                f"{len(r.sections)} sections, {r.charts} charts, {r.size_bytes / 1024:,.0f} KB"
            ),
        )
        run.report = written.path

    print_closing(run, time.monotonic() - total, dbt_log_path())
    return run


def _apply(engine: Engine) -> Any:
    from poisonwatch.remediation import ApplyLock, Filters, apply_actions

    lock = ApplyLock()
    lock.acquire_file()
    try:
        return apply_actions(engine, Filters(), yes=True, lock=lock, console=console)
    finally:
        lock.release()


def _describe_apply(result: Any) -> str:
    applied = sum(result.applied.values())
    return f"{applied:,} of {result.planned:,} applicable actions applied"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}" + ("" if n == 1 else "s")


# Action type → (thing, what happened to it), for "9 conversations ended".
DONE_WORDS = {
    "end_conversation": ("conversation", "ended"),
    "dead_letter": ("message", "dead-lettered"),
    "disable_consumer": ("consumer", "disabled"),
    "pause_queue": ("queue", "paused"),
    "re_enable_queue": ("queue", "re-enabled"),
    "park": ("message", "parked"),
    "discard": ("message", "discarded"),
    "retry_from_dlq": ("message", "replayed"),
    "purge_failure_log": ("failure log", "purged"),
}


def _done_phrase(kind: str, n: int) -> str:
    thing, verb = DONE_WORDS.get(kind, (kind.replace("_", " "), "applied"))
    return f"{_plural(n, thing)} {verb}"


def print_closing(run: DemoRun, seconds: float, dbt_log: Path) -> None:
    """The one-screen summary: found, done, left, report path, next command."""
    console.rule(f"[bold green]demo finished in {seconds:.0f} s")
    table = Table(title="Found", title_justify="left", box=None, pad_edge=False)
    for col in ("broker", "poison", "still live", "retrying/suspect", "failed messages"):
        table.add_column(col, justify="left" if col == "broker" else "right")
    for kind, poison, live, retrying, failed in run.found:
        table.add_row(textsafe.terminal(kind), f"{poison:,}", f"{live:,}", f"{retrying:,}",
                      f"{failed:,}")  # fmt: skip
    console.print(table)
    # The queue's name first: it is what a person looks for; its server or broker after it.
    queues = ", ".join(
        f"{textsafe.terminal(queue, 40)} ({risk}, {textsafe.terminal(where, 30)})"
        for where, queue, risk, _run in run.at_risk[:3]
    )
    more = f" and {len(run.at_risk) - 3} more" if len(run.at_risk) > 3 else ""
    console.print(
        f"Queues at risk or disabled: {len(run.at_risk)}" + (f": {queues}{more}" if queues else ""),
        highlight=False,
    )
    breakers = ", ".join(
        f"{textsafe.terminal(c, 24)} ({textsafe.terminal(r, 20)})" for c, r, _n in run.tripped[:3]
    )
    more = f" and {len(run.tripped) - 3} more" if len(run.tripped) > 3 else ""
    console.print(
        f"Tripped breakers: {len(run.tripped)}" + (f": {breakers}{more}" if breakers else ""),
        highlight=False,
    )
    done = [_done_phrase(kind, n) for kind, n in sorted(run.applied.items(), key=lambda kv: -kv[1])]
    console.print("\n[bold]Done[/bold]: " + ("; ".join(done) if done else "nothing to apply"))
    b, a = run.before, run.after
    console.print(
        "[bold]Left[/bold]: "
        f"live poison {a.get('live poison', 0):,} (was {b.get('live poison', 0):,}); "
        f"blocked behind poison {a.get('blocked behind poison', 0):,} "
        f"(was {b.get('blocked behind poison', 0):,}); "
        f"tripped breakers not disabled {a.get('tripped, not disabled', 0):,}; "
        f"{_plural(a.get('pending', 0), 'pending action')}, "
        f"{a.get('review', 0):,} waiting for a person's review",
        highlight=False,
    )
    console.print()
    console.print(f"Report:  {textsafe.terminal(run.report)}", highlight=False)
    console.print(f"dbt log: {textsafe.terminal(dbt_log)}", highlight=False)
    console.print(
        "Next:    open the report in a browser, then [bold]poisonwatch plan[/bold] for the "
        "actions that need review",
        highlight=False,
    )
