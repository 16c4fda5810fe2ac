"""`poisonwatch generate`: builds the world (the seeds' scenarios and background traffic), runs
the simulation of `state.Engine` and prints its summary."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from poisonwatch.generate.catalog import (
    DESCRIPTIONS,
    DESCRIPTIONS_JSON,
    END_DIALOG,
    EXPENSE_REPORT,
    JMS_BACKGROUND,
    JMS_PERMANENT,
    JMS_TRANSIENT,
    JMS_VALIDATION,
    PROGRESS_REPORT,
    SB_BACKGROUND_QUEUES,
    SB_PERMANENT,
    SB_TRANSIENT,
    SB_UNKNOWN,
    jms_error,
    sb_error,
)
from poisonwatch.generate.io import (
    T0_US,
    guid,
)
from poisonwatch.generate.model import (
    Consumer,
    ErrorSpec,
    JMessage,
    JQueue,
    SBMessage,
    SBQueue,
)
from poisonwatch.generate.policy import load_policies
from poisonwatch.generate.state import (
    ACK,
    DATASET_NAMES,
    HOUR_US,
    MS,
    OK_SB,
    SNAPSHOTS_DURING,
    TICK,
    Actor,
    Engine,
    GenerateSummary,
    Writers,
    rr,
)

# ====================================================================== world and traffic


def build_world(eng: Engine) -> None:
    from poisonwatch.generate.scenarios import fixed_world

    fixed_world(eng)
    for server, db, name, style, types in SB_BACKGROUND_QUEUES:
        eng.sb_queues.append(
            SBQueue(
                server,
                db,
                name,
                style=style,
                service=f"//Adventure-Works.com/{db}/{name.removesuffix('Queue')}Service",
                contract=f"//Adventure-Works.com/{db}/{name.removesuffix('Queue')}Contract",
                activation_procedure=f"dbo.Process{name.removesuffix('Queue')}",
                message_types=types,
                offset_style=server != "SQLPROD02",
            )
        )
    for broker, address, subs, type_name, servers in JMS_BACKGROUND:
        for qname, cid in subs:
            c = Consumer(cid, servers, eng.policies.consumer(cid), fixed=False)
            eng.consumers[cid] = c
            eng.jms_queues.append(JQueue(broker, address, qname, c, [type_name]))


def release_a_bug(eng: Engine, span_us: int) -> None:
    """At some seeds one background agent gets a buggy release part-way through: it fails
    with one exception type, nothing guards it, and its breaker trips (labels follow)."""
    rng = eng.rng
    candidates = [
        c for c in eng.consumers.values() if not c.fixed and c.consumer_id != "agent.monitor"
    ]
    if rng.random() < 0.5:
        c = candidates[rr(rng, len(candidates))]
        cls = JMS_PERMANENT[rr(rng, len(JMS_PERMANENT))]
        c.guarded = False
        c.buggy = (T0_US + span_us // 3 + rr(rng, span_us // 3), jms_error(eng.policies, cls, n=1))


def sb_fate(eng: Engine, q: SBQueue, type_name: str) -> list[tuple[str, ErrorSpec | None]]:
    """A background Service Broker message's fate, as steps (C commit, F failure, E end)."""
    rng = eng.rng
    p = eng.policies
    r = rng.random()
    n = rr(rng, 1, 5000)
    if type_name == PROGRESS_REPORT:
        if r < 0.05:
            err = sb_error(p, 1222)
            return [("F", err)] if rng.random() < 0.5 else [("F", err), ("C", None)]
        return OK_SB
    if r < 0.925:
        return OK_SB
    if r < 0.960:
        k = 1 + min(3, int(rng.expovariate(1.2)))
        steps = [("F", sb_error(p, SB_TRANSIENT[rr(rng, 4)], n=rr(rng, 51, 99))) for _ in range(k)]
        return [*steps, ("C", None)]
    if r < 0.965:  # a deadlock storm: past the threshold, then maybe through
        k = rr(rng, 4, 7)
        steps = [("F", sb_error(p, SB_TRANSIENT[rr(rng, 4)], n=rr(rng, 51, 99))) for _ in range(k)]
        return [*steps, ("C", None)] if rng.random() < 0.5 else steps
    if r < 0.973:  # unknown errors
        k = rr(rng, 1, 6)
        err = sb_error(p, SB_UNKNOWN[rr(rng, 2)], n=n, variant=rr(rng, 2))
        steps = [("F", err)] * k
        return [*steps, ("C", None)] if rng.random() < 0.4 else steps
    if r < 0.981:  # permanent: the application ends the dialog with an error, or it stays
        err = sb_error(p, SB_PERMANENT[rr(rng, 4)], n=n, db=q.database)
        steps = [("F", err)] * rr(rng, 1, 5)
        return [*steps, ("E", None)] if rng.random() < 0.5 else steps
    if r < 0.986 and type_name == EXPENSE_REPORT:  # invalid content fails at once
        err = sb_error(p, 50001 + rr(rng, 2), n=n)
        return [("F", err), ("E", None)] if rng.random() < 0.7 else [("F", err)]
    # parked while still retrying: 1-3 transient failures and no verdict yet
    k = rr(rng, 1, 4)
    return [("F", sb_error(p, SB_TRANSIENT[rr(rng, 4)], n=rr(rng, 51, 99)))] * k


def new_sb_group(eng: Engine, t: int) -> tuple[Actor, int]:
    rng = eng.rng
    bg = [q for q in eng.sb_queues if not q.fixed]
    q = bg[rr(rng, len(bg))]
    group_id = guid(rng.getrandbits(128))
    n_conv = 1 if rng.random() < 0.8 else rr(rng, 2, 4)
    convs: list[list[SBMessage]] = []
    planned = 0
    for _ in range(n_conv):
        handle = guid(rng.getrandbits(128))
        n_msgs = 1 + min(5, int(rng.expovariate(0.8)))
        conv = []
        for seq in range(n_msgs):
            type_name, validation = q.message_types[rr(rng, len(q.message_types))]
            fate = sb_fate(eng, q, type_name)
            body = rng.getrandbits(40)  # the body is built from this when a snapshot shows it
            conv.append(SBMessage(q, group_id, handle, seq, type_name, validation, body, fate))
            planned += len(fate)
        if rng.random() < 0.3:
            conv.append(SBMessage(q, group_id, handle, n_msgs, END_DIALOG, "E", "", [("E", None)]))
            planned += 1
        convs.append(conv)
    reader = f"{q.activation_procedure}:spid{rr(rng, 51, 120)}"
    return eng.sb_group(convs, t, reader), planned


def jms_fate(eng: Engine, heartbeat: bool) -> list[tuple[str, ErrorSpec | None, str | None]]:
    """A background JMS message's fate: A ack, F failed delivery, L unlogged delivery, X expiry."""
    rng = eng.rng
    p = eng.policies
    mda = eng.jms_mda
    r = rng.random()
    n = rr(rng, 1, 100_000)
    if heartbeat:
        if r < 0.05:
            err = jms_error(p, "java.net.SocketTimeoutException", n=n)
            return [("F", err, None), ("X" if rng.random() < 0.5 else "A", None, None)]
        return ACK
    if r < 0.93:
        return ACK

    def transient() -> ErrorSpec:
        return jms_error(p, JMS_TRANSIENT[rr(rng, 4)], n=n, variant=rr(rng, 2))

    if r < 0.97:
        k = 1 + min(mda - 2, int(rng.expovariate(0.7)))
        steps: list[tuple[str, ErrorSpec | None, str | None]] = [
            ("F", transient(), None) for _ in range(k)
        ]
        if k >= 3 and rng.random() < 0.2:
            steps[1] = ("L", None, None)  # a delivery the consumer never logged
        return [*steps, ("A", None, None)]
    if r < 0.974:
        return [("F", transient(), None) for _ in range(mda)]
    if r < 0.986:
        err = jms_error(p, JMS_PERMANENT[rr(rng, len(JMS_PERMANENT))], n=n)
        steps = [("F", err, None) for _ in range(mda)]
        if rng.random() < 0.1:
            steps[2] = ("L", None, None)
        return steps
    if r < 0.990:
        err = jms_error(p, JMS_VALIDATION[rr(rng, 2)], n=n)
        return [("F", err, None) for _ in range(mda)]
    # expired while still being retried: no verdict yet
    k = rr(rng, 1, mda)
    return [*[("F", transient(), None) for _ in range(k)], ("X", None, None)]


def new_jms_message(eng: Engine, t: int) -> list[tuple[Actor, int]]:
    rng = eng.rng
    bg = [jq for jq in eng.jms_queues if not jq.consumer.fixed and not jq.consumer.disabled]
    if not bg:
        return []
    jq = bg[rr(rng, len(bg))]
    subs = [x for x in bg if x.address == jq.address and x.broker == jq.broker]
    eng.msg_counter += 1
    host = "vm-41187" if jq.broker == "artemis-prod-1" else "vm-52203"
    message_id = f"ID:{host}-1795236730220-7:1:1:1:{eng.msg_counter}"
    type_name = jq.types[0]
    group_id = f"customer-{rr(rng, 1, 500)}" if rng.random() < 0.2 else None
    corr = f"corr-{rng.getrandbits(32):08x}" if rng.random() < 0.3 else None
    body = f'{{"id": {eng.msg_counter}, "note": {DESCRIPTIONS_JSON[rr(rng, len(DESCRIPTIONS))]}}}'
    actors = []
    for sub in subs:
        c = sub.consumer
        if c.buggy is not None and t >= c.buggy[0] and rng.random() < 0.6:
            fate = [("F", c.buggy[1], None)] * eng.jms_mda  # the buggy release fails it
        else:
            fate = jms_fate(eng, type_name.endswith("Heartbeat"))
        m = JMessage(sub, message_id, type_name, group_id, corr, body, fate)
        actors.append((eng.jms_message(m, t), sum(1 for s in fate if s[0] in "AF")))
    return actors


def arrivals(eng: Engine, budget: int, span_us: int) -> Iterator[tuple[Any, ...]]:
    """Background traffic: new units at random times until the attempt budget is planned."""
    rng = eng.rng
    planned = 0
    units = 0
    t = T0_US + 60_000_000
    while planned < budget:
        t = yield (t, TICK)
        if rng.random() < 0.45:
            actor, n = new_sb_group(eng, t)
            eng.start(actor)
            planned += n
        else:
            for actor, n in new_jms_message(eng, t):
                eng.start(actor)
                planned += n
        units += 1
        if planned >= budget:
            eng.traffic_end = t
        per_unit = planned / units
        mean_gap = span_us * per_unit / max(1, budget)
        t += max(3, int(rng.expovariate(1.0) * mean_gap))


# ====================================================================== public API


def generate(
    out: Path,
    seed: int = 42,
    attempts: int = 20_000,
    chunk_records: int | None = None,
    alert_scenarios: list[str] | None = None,
    follow_up: bool = False,
) -> GenerateSummary:
    """Write a landing folder under `out` (one sub-folder per dataset) plus `out/labels.jsonl`.

    Same `seed` and `attempts` give byte-identical files. `attempts` is the approximate number of
    receive-attempt records (Service Broker + JMS); the seeds' own scenarios are always included.
    `chunk_records` caps the records per file (default: about an eighth of `attempts`, between
    50 and 1,000,000); it changes how records are split into files, never the records.
    `alert_scenarios` (names of generate.alert_scenarios, or `all`) adds, after the regular
    traffic, the scenarios that raise those alerts. `follow_up` replays the same workload
    without writing it and writes only what comes after a remediation (a later snapshot, the
    stalled queue drained) plus the same labels.
    """
    if chunk_records is not None and chunk_records < 1:
        raise ValueError("chunk_records must be a positive number")
    from poisonwatch.generate import alert_scenarios as alerting
    from poisonwatch.generate.scenarios import fixed_scenarios

    kinds = alerting.check_kinds(alert_scenarios or [])
    started = time.monotonic()
    out = Path(out)
    final_out = out
    if follow_up:
        replay = tempfile.TemporaryDirectory(prefix="poisonwatch-follow-up-")
        out = Path(replay.name)
    out.mkdir(parents=True, exist_ok=True)
    for name in DATASET_NAMES:
        folder = out / name
        if folder.exists():
            for f in sorted(folder.iterdir()):
                if f.is_file():
                    f.unlink()
    eng = Engine(out, seed, attempts, load_policies(), chunk_records=chunk_records)
    build_world(eng)
    fixed_planned = fixed_scenarios(eng)
    budget = max(0, attempts - fixed_planned)
    span_us = max(2 * HOUR_US, budget * 20 * MS)
    release_a_bug(eng, span_us)
    eng.start(arrivals(eng, budget, span_us))
    eng.start(
        eng.snapshots(
            [T0_US + span_us * i // (SNAPSHOTS_DURING + 1) for i in range(1, SNAPSHOTS_DURING + 1)]
        )
    )
    with _Progress(attempts) as update:
        eng.progress = update
        eng.run()
        if kinds:
            # after the regular traffic: its records do not change with the flag
            alerting.alert_world(eng, kinds)
            alerting.start_alert_scenarios(eng, kinds, alerting.next_hour(eng.clock, 5))
            eng.run()
        update(eng.emitted)
    eng.finish()
    files = eng.w.close()
    if follow_up:
        replayed_labels = out / "labels.jsonl"
        out = final_out
        out.mkdir(parents=True, exist_ok=True)
        for name in DATASET_NAMES:
            folder = out / name
            if folder.exists():
                for f in sorted(folder.iterdir()):
                    if f.is_file():
                        f.unlink()
        eng.w = Writers(out, 1000)
        alerting.follow_up(eng, alerting.next_hour(eng.clock, 30))
        files = eng.w.close()
        shutil.copyfile(replayed_labels, out / "labels.jsonl")
        replay.cleanup()
    summary = GenerateSummary(out=out, seed=seed, attempts_requested=attempts)
    for dataset in DATASET_NAMES:
        total = 0
        for path, n in files[dataset]:
            summary.files.append((dataset, path, n, path.stat().st_size))
            total += n
        summary.records[dataset] = total
    labels = out / "labels.jsonl"
    summary.files.append(("labels", labels, sum(eng.label_counts.values()), labels.stat().st_size))
    summary.labels = eng.label_counts
    summary.seconds = time.monotonic() - started
    return summary


class _Progress:
    """A rich progress bar on stderr over attempts written (quiet when not a terminal)."""

    def __init__(self, total: int):
        self.total = total

    def __enter__(self) -> Any:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        console = Console(stderr=True)
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self.bar.start()
        task = self.bar.add_task("generating attempts", total=self.total)
        return lambda n: self.bar.update(task, completed=n)

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


def print_summary(summary: GenerateSummary) -> None:
    """Tables: files and records per dataset, and label counts by classification and reason."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    t = Table(title=f"poisonwatch generate → {summary.out} (seed {summary.seed})")
    for col in ("dataset", "files", "formats", "records", "MB"):
        t.add_column(col, justify="left" if col in ("dataset", "formats") else "right")
    by_dataset: dict[str, list[tuple[Path, int, int]]] = {}
    for dataset, path, n, size in summary.files:
        by_dataset.setdefault(dataset, []).append((path, n, size))
    for dataset, rows in by_dataset.items():
        formats = sorted({"".join(p.suffixes) for p, _, _ in rows})
        t.add_row(
            dataset,
            str(len(rows)),
            " ".join(formats),
            f"{sum(n for _, n, _ in rows):,}",
            f"{sum(s for _, _, s in rows) / 1e6:.1f}",
        )
    console.print(t)
    lt = Table(title="labels.jsonl (ground truth)")
    for col in ("kind", "classification / state", "reason", "count"):
        lt.add_column(col, justify="right" if col == "count" else "left")
    for (kind, cls, reason), n in sorted(summary.labels.items()):
        lt.add_row(kind, cls, reason, f"{n:,}")
    console.print(lt)
    console.print(
        f"{summary.attempts_written:,} attempt records for --attempts "
        f"{summary.attempts_requested:,} in {summary.seconds:.1f} s"
    )
