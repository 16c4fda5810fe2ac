"""The report's charts: matplotlib figures drawn to SVG text for inlining in the page.

SVG keeps the page self-contained without JavaScript: it renders where scripts are blocked (mail
attachments, CI artifact viewers with a strict Content-Security-Policy), it is a few tens of
kilobytes per chart whatever the store's size (the inputs are aggregates), and text stays text
(`svg.fonttype = none`), so no font is embedded and nothing is fetched. Text that came from the
data goes through `label()` (textsafe: control characters made visible, shortened), and
matplotlib escapes it for XML; math parsing is off, so a `$` in a queue name is just a dollar.
"""

from __future__ import annotations

import datetime as dt
import io
import re
import statistics
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import matplotlib
import matplotlib.dates as mdates
from matplotlib.colors import LinearSegmentedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from poisonwatch import textsafe

CLASS_COLORS = {
    "transient": "#4c9be8",
    "unknown": "#9aa5b1",
    "permanent": "#e4572e",
    "validation": "#f3a712",
}
PALETTE = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b", "#9d755d")
STATUS_COLORS = {
    "applied": "#54a24b",
    "awaiting_confirmation": "#4c78a8",
    "pending": "#f58518",
    "failed": "#e45756",
}
DISABLED_SHADE = "#e45756"
WIDTH = 9.0
BASELINE_WINDOWS = 12

_RC = {
    "svg.fonttype": "none",
    "text.parse_math": False,
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Liberation Sans", "Arial", "Helvetica"],
    "font.size": 9.5,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.edgecolor": "#888888",
    "axes.grid": True,
    "axes.grid.axis": "y",
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.8,
    "axes.axisbelow": True,
    "legend.frameon": False,
    "legend.fontsize": 8.5,
    "xtick.color": "#444444",
    "ytick.color": "#444444",
}


def label(text: Any, limit: int = 40) -> str:
    """Data text fit for a chart: control and bidi characters shown as escapes
    (`textsafe.neutralise`), at most `limit` characters."""
    return textsafe.neutralise("" if text is None else str(text).strip(), limit)


@contextmanager
def _style(name: str) -> Iterator[None]:
    # A salt per chart keeps the SVG ids (clip paths) of two charts in one page apart.
    with matplotlib.rc_context({**_RC, "svg.hashsalt": f"pw-{name}"}):
        yield


def to_svg(fig: Figure) -> str:
    """The figure as an `<svg>` element (no XML prolog, no DOCTYPE, no date).

    Every id (and every reference to one) gets the chart's name as a prefix: matplotlib names
    its groups `figure_1`, `axes_1`, … in every figure, and ids must be unique in one page.
    """
    prefix = f"{matplotlib.rcParams['svg.hashsalt']}-"
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata={"Date": None})
    text = buf.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r'\bid="', f'id="{prefix}', text)
    text = text.replace("url(#", f"url(#{prefix}").replace('href="#', f'href="#{prefix}')
    return text


def _counts_axis(axis: Any) -> None:
    """Counts get whole-number ticks (no 2.5 messages), also on an axis of small counts: it
    reaches at least 1, and one whole number in view is enough for the locator (with more
    required it falls back to fractions, 0.15 arrivals)."""
    axis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))
    limits = getattr(axis.axes, f"get_{axis.axis_name}lim")
    low, high = limits()
    if max(low, high) < 1:
        getattr(axis.axes, f"set_{axis.axis_name}lim")(min(low, high, 0), 1)


def _time_axis(ax: Any, maxticks: int = 9, minticks: int = 4) -> None:
    locator = mdates.AutoDateLocator(minticks=minticks, maxticks=maxticks)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def _naive(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=None) if value.tzinfo else value


def _buckets(start: dt.datetime, end: dt.datetime, seconds: int) -> list[dt.datetime]:
    """Every bucket start from the one holding `start` to the one holding `end`."""
    first = int(_naive(start).replace(tzinfo=dt.UTC).timestamp()) // seconds * seconds
    last = int(_naive(end).replace(tzinfo=dt.UTC).timestamp()) // seconds * seconds
    return [
        dt.datetime.fromtimestamp(t, dt.UTC).replace(tzinfo=None)
        for t in range(first, last + 1, seconds)
    ]


def _stacked_bars(
    name: str,
    rows: Sequence[tuple[dt.datetime, str, int]],
    start: dt.datetime,
    end: dt.datetime,
    seconds: int,
    colors: dict[str, str],
    ylabel: str,
) -> str:
    buckets = _buckets(start, end, seconds)
    index = {b: i for i, b in enumerate(buckets)}
    series: dict[str, list[int]] = defaultdict(lambda: [0] * len(buckets))
    for bucket, key, count in rows:
        i = index.get(_naive(bucket))
        if i is not None:
            series[key][i] += count
    keys = [k for k in colors if k in series] + sorted(k for k in series if k not in colors)
    with _style(name):
        fig = Figure(figsize=(WIDTH, 3.0), layout="constrained")
        ax = fig.add_subplot()
        bottom = [0] * len(buckets)
        width = dt.timedelta(seconds=seconds * 0.9)
        for n, key in enumerate(keys):
            color = colors.get(key, PALETTE[n % len(PALETTE)])
            ax.bar(
                buckets, series[key], width=width, bottom=bottom, align="edge",
                color=color, label=label(key, 30), linewidth=0,
            )  # fmt: skip
            bottom = [b + v for b, v in zip(bottom, series[key], strict=True)]
        ax.set_ylabel(ylabel)
        _counts_axis(ax.yaxis)
        _time_axis(ax)
        ax.set_xlim(buckets[0], buckets[-1] + dt.timedelta(seconds=seconds))
        fig.legend(loc="outside upper left", ncols=min(len(keys), 5) or 1)
        return to_svg(fig)


def failures_over_time(
    rows: Sequence[tuple[dt.datetime, str, int]], start: dt.datetime, end: dt.datetime, seconds: int
) -> str:
    """Failed attempts per window, stacked by failure class."""
    return _stacked_bars(
        "failures", rows, start, end, seconds, CLASS_COLORS, "failed attempts per window"
    )


def poison_over_time(
    rows: Sequence[tuple[dt.datetime, str, str, int]],
    start: dt.datetime,
    end: dt.datetime,
    seconds: int,
) -> str:
    """Messages declared poison per window (by their last failure), stacked by reason."""
    by_reason = [(b, reason, n) for b, _kind, reason, n in rows]
    reasons = sorted({r for _, r, _ in by_reason})
    colors = {r: PALETTE[i % len(PALETTE)] for i, r in enumerate(reasons)}
    return _stacked_bars(
        "poison", by_reason, start, end, seconds, colors, "poison messages per window"
    )


def rolling_baseline(values: Sequence[int], windows: int = BASELINE_WINDOWS) -> list[float | None]:
    """For each window, the median of the `windows` before it (None until there is one)."""
    out: list[float | None] = []
    for i in range(len(values)):
        before = values[max(0, i - windows) : i]
        out.append(float(statistics.median(before)) if before else None)
    return out


def dlq_arrivals(
    rows: Sequence[tuple[dt.datetime, int]],
    thresholds: Sequence[tuple[dt.datetime, Any, float | None, float | None, float | None]],
    start: dt.datetime,
    end: dt.datetime,
    seconds: int,
) -> str:
    """Dead-letter arrivals per window, the rolling-median baseline, and alert thresholds."""
    buckets = _buckets(start, end, seconds)
    index = {b: i for i, b in enumerate(buckets)}
    values = [0] * len(buckets)
    for bucket, count in rows:
        i = index.get(_naive(bucket))
        if i is not None:
            values[i] += count
    baseline = rolling_baseline(values)
    with _style("dlq"):
        fig = Figure(figsize=(WIDTH, 3.0), layout="constrained")
        ax = fig.add_subplot()
        width = dt.timedelta(seconds=seconds * 0.9)
        ax.bar(
            buckets, values, width=width, align="edge", color=PALETTE[0], linewidth=0,
            label="arrivals",
        )  # fmt: skip
        centres = [b + dt.timedelta(seconds=seconds / 2) for b in buckets]
        ax.step(
            centres, [float("nan") if v is None else v for v in baseline], where="mid",
            color="#333333", linewidth=1.4, linestyle="--",
            label=f"baseline (median of the previous {BASELINE_WINDOWS} windows)",
        )  # fmt: skip
        marks = [(_naive(b), t) for b, _q, _o, _base, t in thresholds if t is not None]
        if marks:
            ax.scatter(
                [b + dt.timedelta(seconds=seconds / 2) for b, _ in marks],
                [t for _, t in marks],
                marker="_", s=400, linewidths=2.5, color=DISABLED_SHADE, zorder=3,
                label="alert threshold (alerts mart)",
            )  # fmt: skip
        ax.set_ylabel("dead-letter arrivals per window")
        _counts_axis(ax.yaxis)
        _time_axis(ax)
        ax.set_xlim(buckets[0], buckets[-1] + dt.timedelta(seconds=seconds))
        fig.legend(loc="outside upper left", ncols=3)
        return to_svg(fig)


def failure_groups(rows: Sequence[tuple[Any, ...]]) -> str:
    """Top failure groups as horizontal bars, coloured by failure class, each bar captioned
    with its error key and normalised message (full width, so long texts stay readable)."""
    rows = list(rows)
    with _style("groups"):
        fig = Figure(figsize=(WIDTH, 0.5 + 0.42 * len(rows)), layout="constrained")
        ax = fig.add_subplot()
        ys = list(range(len(rows)))
        ax.barh(
            ys, [r[3] for r in rows], color=[CLASS_COLORS.get(r[1], PALETTE[0]) for r in rows],
            height=0.42,
        )  # fmt: skip
        for y, r in zip(ys, rows, strict=True):
            ax.text(
                0, y - 0.27, f"{label(r[0], 48) or '(no error key)'}  ·  {label(r[2], 80)}",
                fontsize=8.5, va="bottom", ha="left", color="#333333",
            )  # fmt: skip
            ax.text(r[3], y, f" {r[3]:,}", fontsize=8, va="center", ha="left", color="#555555")
        ax.set_yticks(ys, [f"#{y + 1}" for y in ys])
        ax.set_ylim(len(rows) - 0.5, -0.85)
        ax.set_xlim(0, max(r[3] for r in rows) * 1.08)
        _counts_axis(ax.xaxis)
        ax.grid(axis="x")
        ax.grid(axis="y", visible=False)
        ax.tick_params(axis="y", length=0)
        ax.set_xlabel("failed attempts")
        seen = [c for c in CLASS_COLORS if any(r[1] == c for r in rows)]
        handles = [matplotlib.patches.Patch(color=CLASS_COLORS[c], label=c) for c in seen]
        fig.legend(handles=handles, loc="outside upper left", ncols=len(seen) or 1)
        return to_svg(fig)


def queue_health(
    series: dict[str, list[tuple[Any, ...]]], start: dt.datetime, end: dt.datetime, seconds: int
) -> str:
    """Per queue: depth and oldest message age; rollback run against the five-rollback line.

    Rows of `series`: (bucket, depth, oldest age s, current rollback run, longest rollback run,
    disabled 0/1). Windows in which the queue was disabled are shaded red in both panels.
    """
    names = list(series)
    with _style("queues"):
        fig = Figure(figsize=(WIDTH, 0.4 + 1.9 * len(names)), layout="constrained")
        axes = fig.subplots(len(names), 2, squeeze=False, sharex=True, width_ratios=(3, 2))
        lim = (_naive(start), _naive(end) + dt.timedelta(seconds=seconds))
        for (left, right), name in zip(axes, names, strict=True):
            rows = sorted(series[name], key=lambda r: r[0])
            times = [_naive(r[0]) for r in rows]
            depth = [r[1] or 0 for r in rows]
            age_min = [(r[2] or 0) / 60 for r in rows]
            run = [r[3] for r in rows]
            for ax, ticks in ((left, 8), (right, 5)):
                _shade_disabled(ax, rows, lim[1])
                ax.set_xlim(*lim)
                _time_axis(ax, maxticks=ticks, minticks=2)
            left.step(times, depth, where="post", color=PALETTE[0], label="depth")
            left.set_ylabel("messages", color=PALETTE[0])
            _counts_axis(left.yaxis)
            left.set_title(label(name, 60), loc="left", fontsize=9.5, fontweight="bold")
            age = left.twinx()
            age.spines["right"].set_visible(True)
            age.step(times, age_min, where="post", color=PALETTE[1], linestyle="--")
            age.set_ylabel("oldest (min)", color=PALETTE[1])
            age.grid(False)
            age.set_ylim(bottom=0)
            left.set_ylim(bottom=0)
            if any(v is not None for v in run):
                right.step(
                    times, [0 if v is None else v for v in run], where="post",
                    color=PALETTE[3], label="rollback run",
                )  # fmt: skip
                right.axhline(5, color="#333333", linestyle=":", linewidth=1.2)
                right.text(
                    lim[0], 5.15, " queue disabled at 5", fontsize=8, color="#333333",
                    va="bottom",
                )  # fmt: skip
                right.set_ylim(0, max(6.5, max((v or 0) for v in run) + 1))
                right.set_ylabel("rollbacks in a row")
                _counts_axis(right.yaxis)
            else:
                right.text(
                    0.5, 0.5, "JMS queue: no rollback limit", ha="center", va="center",
                    transform=right.transAxes, color="#777777",
                )  # fmt: skip
                right.set_yticks([])
        return to_svg(fig)


def _shade_disabled(ax: Any, rows: Sequence[tuple[Any, ...]], end: dt.datetime) -> None:
    """Shade from each disabled snapshot window to the queue's next snapshot (or the end)."""
    for n, row in enumerate(rows):
        if row[5]:
            start = _naive(row[0])
            stop = _naive(rows[n + 1][0]) if n + 1 < len(rows) else end
            ax.axvspan(start, stop, color=DISABLED_SHADE, alpha=0.18, lw=0)


def breakers(
    cells: Sequence[tuple[str, str, int, int]], consumers: Sequence[tuple[Any, ...]]
) -> str:
    """Consumers × servers: the longest run of failures on each server against M."""
    info = {c[0]: c for c in consumers}
    names = [c[0] for c in consumers if any(cell[0] == c[0] for cell in cells)]
    servers = sorted({s for _, s, _, _ in cells})
    grid = [[float("nan")] * len(servers) for _ in names]
    runs: dict[tuple[str, str], int] = {}
    for consumer, server, any_run, _same in cells:
        if consumer in names:
            limit = info[consumer][2] or 1
            grid[names.index(consumer)][servers.index(server)] = min(any_run / limit, 1.0)
            runs[(consumer, server)] = any_run
    cmap = LinearSegmentedColormap.from_list("runs", ["#f4f8fb", "#f3a712", "#e4572e"])
    with _style("breakers"):
        fig = Figure(figsize=(WIDTH, 0.9 + 0.34 * len(names)), layout="constrained")
        ax = fig.add_subplot()
        # pcolormesh, not imshow: vector cells (imshow embeds a PNG in the SVG).
        ax.pcolormesh(
            [x - 0.5 for x in range(len(servers) + 1)], [y - 0.5 for y in range(len(names) + 1)],
            grid, cmap=cmap, vmin=0, vmax=1, edgecolors="white", linewidth=2,
        )  # fmt: skip
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.grid(False)
        ax.set_xticks(range(len(servers)), [label(s, 18) for s in servers], fontsize=8.5)
        ax.xaxis.tick_top()
        ylabels = []
        for name in names:
            row = info[name]
            mark = "  TRIPPED" if row[9] else ""
            ylabels.append(f"{label(name, 34)}  (M={row[2]}, {row[1]}){mark}")
        ax.set_yticks(range(len(names)), ylabels, fontsize=8.5)
        for tick, name in zip(ax.get_yticklabels(), names, strict=True):
            if info[name][9]:
                tick.set_color("#c0392b")
                tick.set_fontweight("bold")
        for (consumer, server), run in runs.items():
            ax.text(
                servers.index(server), names.index(consumer), str(run), ha="center",
                va="center", fontsize=8, color="#222222",
            )  # fmt: skip
        for side in ("left", "bottom", "top", "right"):
            ax.spines[side].set_visible(False)
        ax.tick_params(length=0)
        return to_svg(fig)


def actions(rows: Sequence[tuple[str, str, int, int]]) -> str:
    """Remediation actions per type, stacked by status (applied, awaiting confirmation, …)."""
    types = sorted({t for t, _, _, _ in rows})
    counts = {(t, s): n for t, s, n, _ in rows}
    with _style("actions"):
        fig = Figure(figsize=(WIDTH, 0.6 + 0.36 * len(types)), layout="constrained")
        ax = fig.add_subplot()
        left = [0] * len(types)
        present = {s for _, s, _, _ in rows}
        for status in [s for s in STATUS_COLORS if s in present]:
            values = [counts.get((t, status), 0) for t in types]
            ax.barh(
                range(len(types)), values, left=left, color=STATUS_COLORS[status], label=status,
                height=0.65,
            )  # fmt: skip
            left = [a + b for a, b in zip(left, values, strict=True)]
        ax.set_yticks(range(len(types)), [label(t) for t in types])
        ax.grid(axis="x")
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("actions")
        _counts_axis(ax.xaxis)
        ax.legend(loc="lower right")
        return to_svg(fig)


def backtest(
    columns: Sequence[str], rows: Sequence[tuple[Any, ...]], metrics: Sequence[str]
) -> str:
    """Candidates side by side: one group of bars per candidate, one bar per metric."""
    shown = [m for m in metrics if m in columns]
    with _style("backtest-" + "-".join(shown)):
        fig = Figure(figsize=(WIDTH, 3.0), layout="constrained")
        ax = fig.add_subplot()
        width = 0.8 / max(len(shown), 1)
        for n, metric in enumerate(shown):
            i = list(columns).index(metric)
            ax.bar(
                [x + n * width for x in range(len(rows))], [float(r[i] or 0) for r in rows],
                width=width, color=PALETTE[n % len(PALETTE)], label=metric.replace("_", " "),
            )  # fmt: skip
        ax.set_xticks(
            [x + width * (len(shown) - 1) / 2 for x in range(len(rows))],
            [label(r[0], 16) for r in rows], rotation=30, ha="right",
        )  # fmt: skip
        values = [float(r[list(columns).index(m)] or 0) for r in rows for m in shown]
        if all(v.is_integer() for v in values):
            _counts_axis(ax.yaxis)
        fig.legend(loc="outside upper left", ncols=len(shown))
        return to_svg(fig)
