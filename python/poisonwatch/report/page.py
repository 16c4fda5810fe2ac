"""The report page: header, one section per question, each a chart with a short table under it.

Everything is inline (CSS in a <style>, charts as <svg>), and the page forbids itself any
network request or script with a Content-Security-Policy, so even a missed escape could not
load or run anything. Every text that came from the data goes through `textsafe.html`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from poisonwatch import textsafe
from poisonwatch.report import charts
from poisonwatch.report.queries import ROLLBACK_LIMIT, ReportData

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; form-action 'none'"

STYLE = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
  margin: 0; background: #f5f6f8; color: #1d2330; }
header { background: #1d2330; color: #f5f6f8; padding: 18px 28px 14px; }
header h1 { margin: 0 0 4px; font-size: 22px; font-weight: 600; }
header .meta { color: #b8c0cc; font-size: 13px; }
header .meta span { margin-right: 18px; display: inline-block; max-width: 100%;
  overflow-wrap: anywhere; }
.tiles { display: flex; flex-wrap: wrap; gap: 10px; margin-top: 14px; }
.tile { background: #2a3242; border-radius: 6px; padding: 7px 12px; min-width: 92px; }
.tile b { display: block; font-size: 20px; font-variant-numeric: tabular-nums; }
.tile small { color: #b8c0cc; font-size: 11.5px; }
.tile.bad b { color: #ff8a7a; }
nav { padding: 8px 28px; background: #e9ecf1; font-size: 13px; display: flex;
  flex-wrap: wrap; gap: 4px 16px; }
nav a { color: #2d5b9a; text-decoration: none; white-space: nowrap; }
main { max-width: 1100px; margin: 0 auto; padding: 8px 20px 40px; }
section { background: #fff; border-radius: 8px; box-shadow: 0 1px 2px rgba(0,0,0,.08);
  padding: 14px 20px 16px; margin: 16px 0; }
h2 { font-size: 17px; margin: 0 0 2px; }
p.note { color: #5a6372; margin: 0 0 8px; font-size: 13px; }
figure.chart { margin: 6px 0 10px; }
figure.chart svg { width: 100%; height: auto; display: block; }
.table { overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 12.5px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eceef2;
  vertical-align: top; overflow-wrap: break-word; }
td.mono { overflow-wrap: anywhere; min-width: 18em; }
th { color: #5a6372; font-weight: 600; background: #fafbfc; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.time { white-space: nowrap; font-variant-numeric: tabular-nums; }
td.mono { font-family: ui-monospace, "DejaVu Sans Mono", monospace; font-size: 12px; }
.badge { display: inline-block; padding: 0 6px; border-radius: 8px; font-size: 11.5px; }
.badge.disabled, .badge.critical, .badge.tripped, .badge.loops_forever_risk {
  background: #fde2de; color: #a5281b; }
.badge.at_risk, .badge.warning, .badge.pending { background: #fff0d6; color: #8a5a00; }
.badge.ok, .badge.applied, .badge.resolved { background: #e3f4e1; color: #2d6a27; }
.badge.awaiting_confirmation { background: #e3ecf6; color: #2b4f78; }
.empty { color: #777; font-style: italic; }
footer { color: #777; font-size: 12px; text-align: center; padding: 10px; }
"""

BADGES = {
    "disabled",
    "at_risk",
    "loops_forever_risk",
    "ok",
    "pending",
    "applied",
    "awaiting_confirmation",
    "critical",
    "warning",
    "resolved",
}


def esc(value: Any) -> str:
    """Any value as inert HTML text."""
    return textsafe.html("" if value is None else str(value))


def fmt(value: Any) -> str:
    """A cell value as HTML: numbers grouped, times to the second, booleans as yes/no."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else ""
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.2f}"
    if isinstance(value, dt.datetime):
        return esc(value.strftime("%Y-%m-%d %H:%M:%S"))
    text = esc(value)
    if value in BADGES:
        return f'<span class="badge {text}">{text}</span>'
    return text


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[Any]],
    mono: Sequence[int] = (),
) -> str:
    """An HTML table; numbers right-aligned, every cell escaped."""
    if not rows:
        return '<p class="empty">No rows.</p>'
    numeric = [
        all(
            isinstance(r[i], int | float) and not isinstance(r[i], bool)
            for r in rows
            if r[i] is not None
        )
        and any(r[i] is not None for r in rows)
        for i in range(len(headers))
    ]
    head = "".join(
        f'<th class="num">{esc(h)}</th>' if numeric[i] else f"<th>{esc(h)}</th>"
        for i, h in enumerate(headers)
    )
    body = []
    for row in rows:
        cells = []
        for i, value in enumerate(row):
            cls = (
                "num"
                if numeric[i]
                else "mono"
                if i in mono
                else "time"
                if isinstance(value, dt.datetime)
                else ""
            )
            cells.append(
                f'<td class="{cls}">{fmt(value)}</td>' if cls else f"<td>{fmt(value)}</td>"
            )
        body.append("<tr>" + "".join(cells) + "</tr>")
    # A table wider than its section scrolls in its own box, never the page.
    return (
        f'<div class="table"><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


@dataclass
class Section:
    key: str
    title: str
    note: str
    chart: str | None
    table: str


def _chart(name: str, draw: Callable[[], str]) -> str:
    return f'<figure class="chart" data-chart="{name}">{draw()}</figure>'


def sections(data: ReportData) -> list[Section]:
    """The page's sections, in reading order; optional ones only when their mart exists."""
    w = data.window
    out: list[Section] = []
    if w is None:
        return out
    span = (w.start, w.end, w.seconds)

    sw = data.sparse_window or w
    sparse_span = (sw.start, sw.end, sw.seconds)
    totals: dict[str, int] = {}
    for _, cls, n in data.failures_by_class:
        totals[cls] = totals.get(cls, 0) + n
    out.append(
        Section(
            "failures",
            "Failures over time, by failure class",
            f"Failed receive attempts per {w.label} window. Transient failures (deadlocks, lock "
            "timeouts, TemporaryUnavailableException) deserve a retry; permanent and validation "
            "failures never succeed.",
            _chart("failures", lambda: charts.failures_over_time(data.failures_by_class, *span))
            if data.failures_by_class
            else None,
            table(
                ["failure class", "failed attempts"],
                sorted(totals.items(), key=lambda kv: -kv[1]),
            ),
        )
    )
    out.append(
        Section(
            "poison",
            "Poison declared over time",
            f"Messages classified poison, per {sw.label} window of their last failure (retries "
            "stop once a message is declared), by reason. The table counts every message that "
            "failed at least once.",
            _chart("poison", lambda: charts.poison_over_time(data.poison_declared, *sparse_span))
            if data.poison_declared
            else None,
            table(
                ["broker", "classification", "reason", "messages", "still live"],
                data.poison_by_reason,
            ),
        )
    )
    out.append(_dlq_section(data))
    out.append(
        Section(
            "groups",
            "Top failure groups",
            "Failures grouped by error number or exception class and the message with ids and "
            "numbers masked (as ServiceControl groups failed messages).",
            _chart("groups", lambda: charts.failure_groups(data.failure_groups))
            if data.failure_groups
            else None,
            table(
                [
                    "#",
                    "error",
                    "class",
                    "normalised message",
                    "failures",
                    "messages",
                    "queues",
                    "last seen",
                ],
                [
                    (i + 1, r[0], r[1], r[2], r[3], r[4], r[5], r[7])
                    for i, r in enumerate(data.failure_groups)
                ],
                mono=(3,),
            ),
        )
    )
    out.append(_queue_section(data))
    out.append(_breaker_section(data))
    pending = sum(n for _, s, n, _ in data.actions if s == "pending")
    review = sum(r for _, s, _, r in data.actions if s == "pending")
    awaiting = sum(n for _, s, n, _ in data.actions if s == "awaiting_confirmation")
    out.append(
        Section(
            "actions",
            "Remediation: pending, awaiting confirmation, applied",
            f"Actions in remediation_actions by type. {pending:,} pending, of which {review:,} "
            "need review (never applied by `poisonwatch apply`); "
            f"{awaiting:,} awaiting confirmation (script written, effect not yet seen).",
            _chart("actions", lambda: charts.actions(data.actions)) if data.actions else None,
            table(["action", "status", "actions", "needs review"], data.actions),
        )
    )
    for key, title, note, found in (
        (
            "alerts",
            "Alerts",
            "Open and recently resolved alerts from the alerts mart (latest 50).",
            data.alerts,
        ),
        (
            "incidents",
            "Incidents",
            "Each subject's alerts grouped while they recur within their quiet period, from "
            "the alert_incidents mart, with their owner (latest 50; open, then quiet, then "
            "resolved). Mutes and webhook posts: poisonwatch alerts --incidents.",
            data.incidents,
        ),
    ):
        if found is not None:
            headers, *rows = found
            out.append(Section(key, title, note, "", table(list(headers), rows)))
    out.extend(_backtest_sections(data))
    return out


def _dlq_section(data: ReportData) -> Section:
    w = data.sparse_window or data.window
    assert w is not None
    total = sum(n for _, n in data.dlq_arrivals)
    peaks = sorted(data.dlq_arrivals, key=lambda r: -r[1])[:5]
    note = (
        f"Messages first seen in (or due for) a dead-letter queue, per {w.label} window, against "
        f"the median of the previous {charts.BASELINE_WINDOWS} windows."
    )
    if data.dlq_thresholds:
        note += " Red marks: the threshold of each dlq_arrival_spike alert."
    return Section(
        "dlq",
        "Dead-letter arrivals against the baseline",
        note + f" {total:,} arrivals in range.",
        _chart(
            "dlq",
            lambda: charts.dlq_arrivals(
                data.dlq_arrivals, data.dlq_thresholds, w.start, w.end, w.seconds
            ),
        )
        if data.dlq_arrivals
        else None,
        table(["busiest windows", "arrivals"], peaks),
    )


def _queue_section(data: ReportData) -> Section:
    w = data.window
    assert w is not None
    rows = []
    for (
        kind,
        server,
        database,
        broker,
        queue,
        _at,
        depth,
        age,
        poison,
        run,
        longest,
        risk,
        _d,
    ) in data.queue_latest[:20]:
        where = f"{server}.{database}" if kind == "service_broker" else broker
        rows.append((where, queue, depth, age, poison, run, longest, risk))
    more = len(data.queue_latest) - len(rows)
    return Section(
        "queues",
        "Queue health",
        f"The {len(data.queue_series)} queues most at risk: depth and oldest message age (left), "
        f"the run of whole-transaction rollbacks against Service Broker's {ROLLBACK_LIMIT}-rollback"
        " disable (right); red bands are windows in which the queue was disabled. The table shows "
        "each queue's latest snapshot; loops_forever_risk marks a queue with poison-message "
        "handling off, which Service Broker never disables: its poison messages are received and "
        "rolled back forever" + (f" (first 20 of {len(data.queue_latest)})." if more > 0 else "."),
        _chart("queues", lambda: charts.queue_health(data.queue_series, w.start, w.end, w.seconds))
        if data.queue_series
        else None,
        table(
            [
                "server / broker",
                "queue",
                "depth",
                "oldest (s)",
                "poison",
                "rollback run",
                "longest run",
                "risk",
            ],
            rows,
        ),
    )


def _breaker_section(data: ReportData) -> Section:
    rows = [
        (r[0], r[1], f"{r[4] or 0}/{r[2]}", f"{r[5] or 0}/{r[3]}", r[6], r[7],
         "tripped" if r[9] else "", r[10], r[11])
        for r in data.breakers
        if r[9] or (r[4] or 0) > 0
    ][:20]  # fmt: skip
    tripped = sum(1 for r in data.breakers if r[9])
    return Section(
        "breakers",
        "Consumer circuit breakers, by server",
        f"{tripped} of {len(data.breakers)} consumer settings tripped. Each cell: the longest run "
        "of consecutive failures of that consumer on that server, shaded against its M; seed 002's "
        "fuse trips at N failures of one exception type or M of any type.",
        _chart("breakers", lambda: charts.breakers(data.breaker_cells, data.breakers))
        if data.breaker_cells
        else None,
        table(
            [
                "consumer",
                "mode",
                "any-type run / M",
                "same-type run / N",
                "exception",
                "servers",
                "state",
                "reason",
                "disabled",
            ],
            rows,
            mono=(4,),
        ),
    )


EVIDENCE_HEADERS = (
    "error key",
    "message pattern",
    "seed class",
    "failures",
    "messages",
    "success share",
    "evidence",
    "recommended",
    "saves",
)


def _backtest_sections(data: ReportData) -> list[Section]:
    out = []
    if data.policy_backtest is not None:
        columns, rows = data.policy_backtest
        out.append(
            Section(
                "policy-backtest",
                "Policy backtest: candidates side by side",
                "History replayed under each candidate failure policy (summed over queues; "
                "means and p95s averaged): caught, false poison and missed messages.",
                _chart(
                    "policy-backtest",
                    lambda: charts.backtest(
                        columns, rows, ("caught", "false_poison", "missed", "declared_poison")
                    ),
                )
                if rows
                else None,
                table([c.replace("_", " ") for c in columns], rows),
            )
        )
    if data.breaker_backtest is not None:
        columns, rows = data.breaker_backtest
        metrics = [c for c in columns[1:] if c != "consumer_count"][:4]
        out.append(
            Section(
                "breaker-backtest",
                "Breaker backtest: candidates side by side",
                "History replayed under each candidate circuit-breaker policy (summed over "
                "consumers).",
                _chart("breaker-backtest", lambda: charts.backtest(columns, rows, metrics))
                if rows
                else None,
                table([c.replace("_", " ") for c in columns], rows),
            )
        )
    if data.error_evidence is not None:
        out.append(
            Section(
                "error-evidence",
                "Error classes from evidence",
                "Per error signature: how often a failure was followed by a success of the same "
                "message, and the class seeds/error_classes.csv should give it where the history "
                "contradicts the seed (recommendations first; at most 30 signatures).",
                "",
                table(EVIDENCE_HEADERS, data.error_evidence, mono=(1,)),
            )
        )
    return out


def render(data: ReportData, store: str, target: str, generated_at: dt.datetime) -> str:
    """The whole page as one string."""
    parts = sections(data)
    w = data.window
    meta = [f"store {esc(store)}", f"target {esc(target)}"]
    if w is not None:
        meta.append(
            f"{w.start:%Y-%m-%d %H:%M} – {w.end:%Y-%m-%d %H:%M} UTC, {esc(w.label)} windows"
        )
    meta.append(f"generated {generated_at:%Y-%m-%d %H:%M:%S} UTC")
    bad = {"live poison", "queues at risk or disabled", "tripped breakers"}
    tiles = "".join(
        f'<div class="tile{" bad" if name in bad and value else ""}"><b>{value:,}</b>'
        f"<small>{esc(name)}</small></div>"
        for name, value in data.counts.items()
    )
    nav = "".join(f'<a href="#{s.key}">{esc(s.title.split(":")[0])}</a>' for s in parts)
    body = []
    for s in parts:
        chart = (
            '<p class="empty">Nothing to plot in this range.</p>' if s.chart is None else s.chart
        )
        body.append(
            f'<section id="{s.key}"><h2>{esc(s.title)}</h2><p class="note">{esc(s.note)}</p>'
            f"{chart}{s.table}</section>"
        )
    if not parts:
        body.append(
            '<section><p class="empty">The store has no attempts yet: run <code>poisonwatch '
            "ingest</code> and <code>dbt build</code> first.</p></section>"
        )
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>poisonwatch report</title><style>{STYLE}</style></head><body>"
        f'<header><h1>poisonwatch report</h1><div class="meta"><span>'
        + "</span><span>".join(meta)
        + f'</span></div><div class="tiles">{tiles}</div></header>'
        f"<nav>{nav}</nav><main>{''.join(body)}</main>"
        "<footer>poisonwatch report: one file, no scripts, no network requests.</footer>"
        "</body></html>\n"
    )
