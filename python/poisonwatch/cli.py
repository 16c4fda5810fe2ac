"""The `poisonwatch` command: parses arguments and calls one function per command."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console

from poisonwatch import textsafe
from poisonwatch.config import PoisonwatchError
from poisonwatch.textsafe import terminal

err = Console(stderr=True)


def _cmd_generate(args: argparse.Namespace) -> int:
    from poisonwatch.generate import generate, print_summary

    summary = generate(
        Path(args.out),
        seed=args.seed,
        attempts=args.attempts,
        chunk_records=args.chunk_records,
        alert_scenarios=args.alert_scenario,
        follow_up=args.follow_up,
    )
    print_summary(summary)
    return 0


def _cmd_backtest(args: argparse.Namespace) -> int:
    from poisonwatch.backtest import print_backtest, run_backtest

    result = run_backtest(
        args.target,
        [Path(p) for p in args.candidates],
        labels=Path(args.labels) if args.labels else None,
    )
    print_backtest(result)
    if result.label_problems is not None:
        for problem in result.label_problems:
            err.print(f"[red]labels: {textsafe.terminal(problem)}[/red]")
        if result.label_problems:
            return 1
        err.print("labels: the backtest agrees with poison_messages and the labels")
    return 0


def _cmd_alerts(args: argparse.Namespace) -> int:
    from poisonwatch.alerts import run_alerts

    return run_alerts(
        args.target,
        since=args.since,
        fmt=args.format,
        webhook=args.webhook,
        kinds=args.kind,
        include_resolved=args.include_resolved,
        incidents=args.incidents,
    )


def _cmd_alerts_mute(args: argparse.Namespace) -> int:
    from poisonwatch.alerts import run_mute

    return run_mute(
        args.mute_kind,
        args.mute_subject,
        getattr(args, "duration", None),
        getattr(args, "reason", ""),
        unmute=args.alerts_action == "unmute",
    )


def _cmd_bench(args: argparse.Namespace) -> int:
    from poisonwatch.bench import DEFAULT_SIZES, run_bench

    if args.target not in (None, "local"):
        raise PoisonwatchError("bench measures the embedded default only (target `local`)")
    run_bench(
        args.attempts or list(DEFAULT_SIZES),
        seed=args.seed,
        work=Path(args.work) if args.work else None,
        out=Path(args.out) if args.out else None,
        keep=args.keep,
        data_tests=not args.no_data_tests,
        increment=args.increment,
        serve=not args.no_serve,
    )
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _cmd_ingest(args: argparse.Namespace) -> int:
    from poisonwatch.ingest import ingest, print_summary
    from poisonwatch.warehouse.engine import connect

    with connect(args.target) as engine:
        summary = ingest(engine, Path(args.landing))
    print_summary(summary)
    if args.strict and summary.rejected_total:
        err.print(f"[red]--strict: {summary.rejected_total} record(s) or file(s) rejected[/red]")
        return 1
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    from poisonwatch.warehouse.build import run_build

    if args.ingest is None:
        run_build(args.target, full_refresh=args.full_refresh)
        return 0
    from poisonwatch.ingest import ingest, print_summary

    landing = Path(args.ingest)

    def ingest_landing(engine: Any) -> None:
        print_summary(ingest(engine, landing))

    run_build(args.target, full_refresh=args.full_refresh, first=ingest_landing)
    return 0


def _cmd_sql(args: argparse.Namespace) -> int:
    from poisonwatch.warehouse.sqlrun import run_sql

    run_sql(args.query, fmt=args.format, target=args.target, wide=args.wide, as_of=args.as_of)
    return 0


def _cmd_check(args: argparse.Namespace) -> int:
    from poisonwatch.quality import print_check_report, run_checks
    from poisonwatch.warehouse.engine import connect

    with connect(args.target, reads_only=True) as engine:
        report = run_checks(
            engine,
            args.suite,
            freshness_days=args.freshness_days,
            databases={"raw": args.raw_database, "marts": args.marts_database},
        )
    print_check_report(report, verbose=args.verbose)
    if args.require_all and report.success and not report.complete:
        skipped = [s.name for s in report.suites if s.status != "passed"] or ["(no suite selected)"]
        print(f"--require-all: not run: {', '.join(skipped)}", file=sys.stderr)
    return report.exit_code(require_all=args.require_all)


def _cmd_demo(args: argparse.Namespace) -> int:
    from poisonwatch.demo import run_demo

    run = run_demo(
        Path(args.landing) if args.landing else None,
        seed=args.seed,
        attempts=args.attempts,
        target=args.target,
        report=Path(args.report) if args.report else None,
        alert_scenarios=args.alert_scenario,
    )
    return 0 if run.ok else 1


def _cmd_verify(args: argparse.Namespace) -> int:
    from poisonwatch.quality import compare_labels, print_label_report
    from poisonwatch.warehouse.engine import connect

    with connect(args.target, reads_only=True) as engine:
        report = compare_labels(engine, Path(args.labels))
    print_label_report(report)
    return 0 if report.ok else 1


def _cmd_cluster(args: argparse.Namespace) -> int:
    from poisonwatch.cluster import run_cluster

    return run_cluster(args.action, workers=args.workers, timeout=args.timeout)


def _cmd_plan(args: argparse.Namespace) -> int:
    from poisonwatch.remediation import Filters, run_plan

    filters = Filters(queue=args.queue, action_type=args.type)
    run_plan(
        filters,
        Path(args.sql) if args.sql else None,
        target=args.target,
        brokers=args.broker,
        wide=args.wide,
        fmt=args.format,
        awaiting=args.awaiting,
    )
    return 0


def _cmd_collect(args: argparse.Namespace) -> int:
    from poisonwatch.broker import collect, print_result, resolve_broker
    from poisonwatch.broker.profiles import with_ca_file
    from poisonwatch.config import home

    target = with_ca_file(resolve_broker(args.broker), args.ca_file)
    patterns = [q.strip() for q in (args.queues or "").split(",") if q.strip()]
    out = Path(args.out) if args.out else home() / "landing"
    result = collect(target, patterns, out=out, every=args.every, count=args.count)
    print_result(result)
    if args.ingest and result.files:
        from poisonwatch.ingest import ingest
        from poisonwatch.ingest import print_summary as print_ingest
        from poisonwatch.warehouse.engine import connect

        with connect(args.target) as engine:
            print_ingest(ingest(engine, out))
    return 1 if result.error else 0


def _cmd_apply(args: argparse.Namespace) -> int:
    from poisonwatch.remediation import Filters, run_apply

    filters = Filters(queue=args.queue, action_type=args.type, limit=args.limit)
    run_apply(filters, yes=args.yes, target=args.target, brokers=args.broker)
    return 0


def _cmd_store(args: argparse.Namespace) -> int:
    from poisonwatch.warehouse.store import rebuild_store

    rebuild_store(build=not args.no_build)
    return 0


def _cmd_replay(args: argparse.Namespace) -> int:
    from poisonwatch.remediation import request_replay

    request_replay(args.message_id, args.broker, args.queue, args.note, target=args.target)
    return 0


def _cmd_resume(args: argparse.Namespace) -> int:
    from poisonwatch.remediation import resume_queue

    resume_queue(args.queue, args.broker, args.note, target=args.target, by_hand=args.by_hand)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
    from poisonwatch.report import run_report

    run_report(Path(args.out) if args.out else None, since=args.since, target=args.target)
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    from poisonwatch.alerts import parse_duration
    from poisonwatch.broker import resolve_broker
    from poisonwatch.config import home
    from poisonwatch.serve import ServeOptions, print_status, run_serve, stop_server

    if args.status:
        return print_status(args.format)
    if args.stop:
        return stop_server()
    brokers = [resolve_broker(name) for name in args.broker]
    landing = Path(args.landing) if args.landing else None
    if brokers and landing is None:
        landing = home() / "landing"
        landing.mkdir(parents=True, exist_ok=True)
    options = ServeOptions(
        port=args.port,
        every=parse_duration(args.every).total_seconds(),
        landing=landing,
        brokers=brokers,
        collect_every=parse_duration(args.collect_every).total_seconds(),
        webhook=args.webhook,
        report=Path(args.report) if args.report else None,
        cycles=args.cycles,
        data_tests=False if args.no_data_tests else None,
    )
    return run_serve(options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="poisonwatch",
        description="Find poison messages in Service Broker and JMS queues; remove them safely.",
        epilog="example: poisonwatch demo --attempts 3000   (then open the report it writes)\n"
        "         poisonwatch COMMAND --help   (each command's options and an example)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--target",
        default=None,
        help="dbt target of profiles.yml (default: $POISONWATCH_TARGET or `local`)",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "demo",
        help="generate → ingest → dbt build → apply → dbt build → report, one screen",
        epilog="example: poisonwatch demo --attempts 3000 --report /tmp/report.html",
    )
    p.add_argument("--landing", default=None, help="landing folder (default: under the store)")
    p.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    p.add_argument(
        "--attempts", type=_positive_int, default=20_000, help="workload size (default 20000)"
    )
    p.add_argument(
        "--report",
        default=None,
        metavar="FILE",
        help="where to write the report (default: poisonwatch-report.html in the store)",
    )
    p.add_argument(
        "--alert-scenario",
        action="append",
        default=[],
        metavar="KIND",
        help="passed to generate: raise this alert kind after the regular traffic (or all)",
    )
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser(
        "generate",
        help="write a deterministic workload of landing files + labels",
        epilog="example: poisonwatch generate --out landing --seed 7 --attempts 100000",
    )
    p.add_argument("--out", required=True, help="landing folder to write")
    p.add_argument("--seed", type=int, default=42, help="random seed (same seed, same bytes)")
    p.add_argument(
        "--attempts", type=int, default=20_000, help="approximate number of receive attempts"
    )
    p.add_argument(
        "--chunk-records",
        type=_positive_int,
        default=None,
        help="records per file (default: about attempts / 8, between 50 and 1,000,000)",
    )
    p.add_argument(
        "--alert-scenario",
        action="append",
        default=[],
        metavar="KIND",
        help="after the regular traffic, raise this alert kind (dlq_arrival_spike, "
        "queue_stalled, queue_disable_imminent, queue_loops_forever, "
        "breaker_tripped_still_receiving, new_failure_group, or all); repeatable",
    )
    p.add_argument(
        "--follow-up",
        action="store_true",
        help="write only what follows a remediation of the same workload (same --seed, "
        "--attempts and --alert-scenario): the stalled queue drained, a later snapshot",
    )
    p.set_defaults(func=_cmd_generate)

    p = sub.add_parser(
        "collect",
        help="browse a live ActiveMQ broker's queues and DLQs into landing files",
        epilog="example: poisonwatch collect --broker stomp://127.0.0.1:61613 --ingest; "
        "Artemis: --broker artemis://USER:PASSWORD@127.0.0.1:8161 (the console's port)",
    )
    p.add_argument(
        "--broker",
        required=True,
        help="stomp://HOST:PORT[?name=B], stomp+ssl://HOST:PORT[?name=B], "
        "artemis://[USER:PASSWORD@]HOST:PORT[?name=B] or a name in brokers.yml",
    )
    p.add_argument(
        "--ca-file",
        default=None,
        metavar="PEM",
        help="stomp+ssl: verify the broker's certificate against this CA file (default: the "
        "system's trusted CAs; verification is always on)",
    )
    p.add_argument(
        "--queues",
        default=None,
        help="comma-separated queue names or patterns (orders.*); default: every queue. "
        "Dead-letter queues are always included",
    )
    p.add_argument(
        "--out", default=None, help="landing folder (default: $POISONWATCH_HOME/landing)"
    )
    p.add_argument("--every", type=float, default=None, metavar="SECONDS", help="repeat period")
    p.add_argument("--count", type=int, default=1, help="number of snapshots (with --every)")
    p.add_argument("--ingest", action="store_true", help="ingest the landing folder afterwards")
    p.set_defaults(func=_cmd_collect)

    p = sub.add_parser(
        "ingest",
        help="load landing files into raw tables (rejects kept)",
        epilog="example: poisonwatch ingest --strict landing",
    )
    p.add_argument("landing", help="landing folder: one sub-folder per dataset")
    p.add_argument("--strict", action="store_true", help="exit 1 when anything was rejected")
    p.set_defaults(func=_cmd_ingest)

    p = sub.add_parser(
        "build",
        help="the production build (dbt build --selector production) as far as new input "
        "reaches; nothing when nothing new landed",
        epilog="example: poisonwatch build --ingest landing/   (or: poisonwatch ingest "
        "landing/ && poisonwatch build)",
    )
    p.add_argument(
        "--full-refresh", action="store_true", help="rebuild every model from raw (always runs)"
    )
    p.add_argument(
        "--ingest",
        metavar="LANDING",
        help="ingest this landing folder first, in the same Spark driver (saves a driver start "
        "and its warm-up)",
    )
    p.set_defaults(func=_cmd_build)

    p = sub.add_parser(
        "sql",
        help="run Spark SQL on the warehouse of the current target",
        epilog='example: poisonwatch sql "select * from poisonwatch.queue_health" --format csv',
    )
    p.add_argument("query", help="one Spark SQL statement")
    p.add_argument("--format", choices=("table", "csv", "json"), default="table")
    p.add_argument("--wide", action="store_true", help="table: long values whole, not cut")
    p.add_argument(
        "--as-of",
        metavar="TIME",
        help="read every table as it was at TIME (ISO 8601, UTC unless it says; Delta tables)",
    )
    p.set_defaults(func=_cmd_sql)

    p = sub.add_parser(
        "report",
        help="write one self-contained HTML page of the marts, with plots",
        description="Write one self-contained HTML page (no scripts, no network requests) with "
        "plots of failures, poison, dead letters, queue health, breakers and remediation.",
        epilog="example: poisonwatch report --out report.html --since 1d",
    )
    p.add_argument(
        "--out", default=None, metavar="FILE", help="default: poisonwatch-report.html here"
    )
    p.add_argument(
        "--since",
        default=None,
        metavar="DURATION",
        help="only the last DURATION before the newest attempt (e.g. 90m, 6h, 2d, 1w)",
    )
    p.set_defaults(func=_cmd_report)

    p = sub.add_parser(
        "alerts",
        help="open alerts; exit 0 none, 1 warning, 2 critical",
        epilog="example: poisonwatch alerts --since 2h --format json --webhook http://hook",
    )
    p.add_argument("--since", help="only alerts seen within this long (30m, 2h, 7d)")
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument(
        "--webhook",
        metavar="URL",
        help="POST each incident when it opens, changes severity and resolves (Slack JSON)",
    )
    p.add_argument("--kind", action="append", default=[], help="only this alert kind (repeatable)")
    p.add_argument(
        "--include-resolved", action="store_true", help="print recently resolved alerts too"
    )
    p.add_argument(
        "--incidents",
        action="store_true",
        help="list incidents (a subject's alerts grouped, with owner, mute and posts)",
    )
    p.set_defaults(func=_cmd_alerts)
    actions = p.add_subparsers(dest="alerts_action", metavar="ACTION")
    for action, text in (
        ("mute", "post nothing about KIND on SUBJECT for a while (still listed)"),
        ("unmute", "end a mute now"),
    ):
        q = actions.add_parser(
            action,
            help=text,
            epilog=f"example: poisonwatch alerts {action} queue_stalled ExpenseQueue"
            + (' --for 2h --reason "draining by hand"' if action == "mute" else ""),
        )
        q.add_argument("mute_kind", metavar="KIND", help="the alert kind")
        q.add_argument(
            "mute_subject", metavar="SUBJECT", help="queue, consumer or failure group (id start)"
        )
        if action == "mute":
            q.add_argument("--for", dest="duration", required=True, help="30m, 2h, 7d")
            q.add_argument("--reason", required=True, help="why (shown beside the incident)")
        q.set_defaults(func=_cmd_alerts_mute)

    p = sub.add_parser(
        "verify",
        help="compare the marts with a generator's labels.jsonl",
        epilog="example: poisonwatch verify landing/labels.jsonl",
    )
    p.add_argument("labels", help="labels.jsonl written by `poisonwatch generate`")
    p.set_defaults(func=_cmd_verify)

    p = sub.add_parser(
        "plan",
        help="pending remediation actions; --sql writes T-SQL scripts",
        epilog="example: poisonwatch plan --queue dbo.ExpenseQueue --sql remediation.sql",
    )
    p.add_argument("--queue", default=None, help="only actions on this queue")
    p.add_argument("--type", default=None, help="only this action type (e.g. end_conversation)")
    p.add_argument(
        "--sql",
        default=None,
        metavar="FILE",
        help="write the T-SQL scripts for a DBA, one per server: FILE's name + server + hash",
    )
    p.add_argument(
        "--awaiting",
        action="store_true",
        help="with --sql: also the actions whose script was written but not yet seen done",
    )
    p.add_argument(
        "--broker", action="append", default=None, help="a live broker (see apply --broker)"
    )
    p.add_argument("--wide", action="store_true", help="every row, every value whole")
    p.add_argument(
        "--format",
        choices=("table", "json", "csv"),
        default="table",
        help="json/csv: every column of every action on stdout",
    )
    p.set_defaults(func=_cmd_plan)

    p = sub.add_parser(
        "apply",
        help="apply pending actions exactly once (dry run without --yes)",
        epilog="example: poisonwatch apply --type end_conversation --yes",
    )
    p.add_argument("--queue", default=None, help="only actions on this queue")
    p.add_argument("--type", default=None, help="only this action type")
    p.add_argument("--limit", type=int, default=None, help="apply at most N actions")
    p.add_argument("--yes", action="store_true", help="really apply (default: dry run)")
    p.add_argument(
        "--broker",
        action="append",
        default=None,
        help="run JMS actions on this live ActiveMQ broker: stomp://HOST:PORT?name=B, "
        "artemis://USER:PW@HOST:CONSOLE_PORT?name=B or a name in "
        "$POISONWATCH_HOME/brokers.yml (repeat; brokers.yml's are live anyway)",
    )
    p.set_defaults(func=_cmd_apply)

    p = sub.add_parser(
        "replay",
        help="request dead-lettered JMS messages back to their queue",
        epilog='example: poisonwatch replay --message-id ID:app01-1 --note "fixed upstream"',
    )
    p.add_argument("--message-id", action="append", required=True, help="JMSMessageID (repeat)")
    p.add_argument("--broker", default=None, help="broker name (default: any)")
    p.add_argument("--queue", default=None, help="the DLQ (default: whichever holds it)")
    p.add_argument("--note", default=None, help="why, for the record")
    p.set_defaults(func=_cmd_replay)

    p = sub.add_parser(
        "resume",
        help="turn a queue apply paused (tripped breaker) back on",
        epilog='example: poisonwatch resume --queue orders --broker orders-artemis --note "fixed"',
    )
    p.add_argument("--queue", required=True, help="the paused queue")
    p.add_argument(
        "--broker",
        default=None,
        help="artemis://…?name=B or a name in brokers.yml: resumed there (default: the one "
        "apply paused it on, when brokers.yml connects it)",
    )
    p.add_argument("--note", default=None, help="why, for the record")
    p.add_argument(
        "--by-hand",
        action="store_true",
        help="you resumed it on the broker yourself: only record it",
    )
    p.set_defaults(func=_cmd_resume)

    p = sub.add_parser(
        "backtest",
        help="replay history under candidate policies; recommend one per queue",
        epilog="example: poisonwatch backtest --candidates my_candidates.csv",
    )
    p.add_argument(
        "--candidates",
        action="append",
        default=[],
        metavar="FILE",
        help="CSV with the columns of seeds/candidate_policies.csv or of "
        "seeds/candidate_consumer_policies.csv, instead of that seed (until the next build); "
        "at most one of each",
    )
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="also check against a generator's labels.jsonl (exit 1 on a disagreement)",
    )
    p.set_defaults(func=_cmd_backtest)

    p = sub.add_parser(
        "check",
        help="great-expectations suites over raw tables and marts",
        epilog="example: poisonwatch check --suite marts -v",
    )
    p.add_argument(
        "--suite",
        default=None,
        help="suite name(s), layer (raw, marts) or pattern, comma-separated (default: all)",
    )
    p.add_argument(
        "--freshness-days",
        type=float,
        default=2.0,
        help="latest queue snapshot must be within this many days of the newest attempt",
    )
    p.add_argument(
        "--raw-database", default=None, help="check raw tables in this database (default: raw)"
    )
    p.add_argument(
        "--marts-database",
        default=None,
        help="check marts in this database (default: the target's schema)",
    )
    p.add_argument(
        "--require-all",
        action="store_true",
        help="exit 1 unless every selected suite ran and passed (a skipped suite fails)",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="list every expectation")
    p.set_defaults(func=_cmd_check)

    p = sub.add_parser(
        "store",
        help="repair the embedded store (metastore + warehouse folder)",
        epilog="example: poisonwatch store rebuild   (after a lost metastore_db)",
    )
    p.add_argument("action", choices=("rebuild",), help="rebuild: fresh store from raw + ops")
    p.add_argument("--no-build", action="store_true", help="skip the dbt build afterwards")
    p.set_defaults(func=_cmd_store)

    p = sub.add_parser(
        "cluster",
        help="a local Spark standalone cluster + Thrift server (target `cluster`)",
        epilog="example: poisonwatch cluster start --workers 2",
    )
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--workers", type=int, default=None, help="number of workers (default 2)")
    p.add_argument("--timeout", type=float, default=300.0, help="start-up timeout in seconds")
    p.set_defaults(func=_cmd_cluster)

    p = sub.add_parser(
        "serve",
        help="one warm driver: SQL over Thrift, a build every cycle",
        epilog="example: poisonwatch serve --landing landing/ --every 30s --webhook URL",
    )
    p.add_argument(
        "--port", type=int, default=10001, help="Thrift port on 127.0.0.1 (default 10001; 0: any)"
    )
    p.add_argument("--every", default="30s", help="time between cycles (default 30s)")
    p.add_argument("--landing", default=None, help="landing folder to ingest from every cycle")
    p.add_argument(
        "--broker",
        action="append",
        default=[],
        metavar="URL|NAME",
        help="collect this live broker's queues and DLQs into the landing folder (repeatable)",
    )
    p.add_argument(
        "--collect-every", default="1m", help="time between collects from --broker (default 1m)"
    )
    p.add_argument("--webhook", default=None, help="POST incidents: opened, severity, resolved")
    p.add_argument("--report", default=None, help="rewrite this report file after each build")
    p.add_argument("--cycles", type=_positive_int, default=None, help="stop after this many cycles")
    p.add_argument("--status", action="store_true", help="is one running? (exit 0 yes, 3 no)")
    p.add_argument(
        "--no-data-tests", action="store_true", help="build models only (a quicker cycle)"
    )
    p.add_argument("--stop", action="store_true", help="stop the running one (SIGTERM)")
    p.add_argument("--format", choices=("table", "json"), default="table", help="for --status")
    p.set_defaults(func=_cmd_serve)

    p = sub.add_parser(
        "bench",
        help="time ingest, full and incremental dbt build, plan/apply against a floor, per size",
        epilog="example: poisonwatch bench --attempts 100000 --keep",
    )
    p.add_argument(
        "--attempts",
        type=_positive_int,
        nargs="+",
        default=None,
        metavar="N",
        help="workload sizes in attempts (default: 100000 1000000 10000000)",
    )
    p.add_argument("--seed", type=int, default=42, help="generator seed (default 42)")
    p.add_argument(
        "--work",
        default=None,
        help="work folder: one sub-folder per size, deleted first "
        "(default: $POISONWATCH_HOME/bench)",
    )
    p.add_argument(
        "--out", default=None, help="results file (default: bench/results.json in the project)"
    )
    p.add_argument(
        "--keep", action="store_true", help="keep each size's landing files and store afterwards"
    )
    p.add_argument(
        "--increment",
        type=_positive_int,
        default=None,
        metavar="N",
        help="the delta holds about N attempts at every size instead of 1 %% of it (the same "
        "new data on each history); results go to bench/results-increment-N.json",
    )
    p.add_argument(
        "--no-data-tests",
        action="store_true",
        help="time models and seeds only (dbt data tests excluded); the row is marked as such",
    )
    p.add_argument(
        "--no-serve", action="store_true", help="leave out the serve phase after the others"
    )
    p.set_defaults(func=_cmd_bench)

    # Each command's own --help starts with its one-line summary.
    for action in sub._choices_actions:
        command = sub.choices[action.dest]
        command.description = command.description or action.help
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except PoisonwatchError as exc:
        # An error may quote data (a file name, a value): shown inert.
        message = terminal(exc, one_line=False)
        err.print(f"[bold red]poisonwatch {args.command}:[/bold red] {message}", soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        err.print("[red]interrupted[/red]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
