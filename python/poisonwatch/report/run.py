"""`poisonwatch report`: collect the aggregates, draw the charts, write one HTML file."""

from __future__ import annotations

import datetime as dt
import os
import re
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from poisonwatch.config import PoisonwatchError, home
from poisonwatch.report import page
from poisonwatch.report.queries import collect

if TYPE_CHECKING:
    from poisonwatch.warehouse.engine import Engine

DEFAULT_OUT = Path("poisonwatch-report.html")
_UNITS = {"s": 1, "m": 60, "min": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


@dataclass(frozen=True)
class ReportResult:
    path: Path
    size_bytes: int
    seconds: float
    sections: tuple[str, ...]
    charts: int


def parse_duration(text: str) -> int:
    """'90m', '6h', '2d', '1w', '45s' (or a sum like '1d12h') → seconds."""
    parts = re.findall(r"(\d+)\s*(min|[smhdw])", text.strip().lower())
    joined = "".join(f"{n}{u}" for n, u in parts)
    if not parts or joined != re.sub(r"\s+", "", text.strip().lower()):
        raise PoisonwatchError(f"--since {text!r}: expected a duration such as 90m, 6h, 2d or 1w")
    seconds = sum(int(n) * _UNITS[u] for n, u in parts)
    if seconds <= 0:
        raise PoisonwatchError(f"--since {text!r}: the duration must be longer than zero")
    return seconds


def write_report(engine: Engine, out: Path | None = None, since: str | None = None) -> ReportResult:
    """Write the report to `out` (atomically: a reader never sees half a page)."""
    started = time.monotonic()
    path = (out or DEFAULT_OUT).resolve()
    since_seconds = parse_duration(since) if since else None
    data = collect(engine, since_seconds)
    generated = dt.datetime.now(dt.UTC)
    text = page.render(data, str(home()), engine.target, generated)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    sections = tuple(re.findall(r'<section id="([^"]+)"', text))
    return ReportResult(
        path=path,
        size_bytes=len(text.encode("utf-8")),
        seconds=time.monotonic() - started,
        sections=sections,
        charts=text.count('<figure class="chart"'),
    )


def run_report(
    out: Path | None = None, since: str | None = None, target: str | None = None
) -> Path:
    """`poisonwatch report`: write the page for the current target and say where it is."""
    from rich.console import Console

    from poisonwatch.warehouse.engine import connect

    if since:
        parse_duration(since)  # a bad --since fails before Spark starts
    with connect(target, reads_only=True) as engine:
        result = write_report(engine, out, since)
    Console(stderr=True).print(
        f"report: {len(result.sections)} sections, {result.charts} charts, "
        f"{result.size_bytes / 1024:,.0f} KB in {result.seconds:.1f} s"
    )
    print(result.path)
    return result.path
