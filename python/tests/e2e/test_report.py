"""The report page: drawn in a real headless Chromium, offline, with hostile text kept inert.

The page is rendered from fixed aggregates (fixtures/report_data.py), so this module needs no
Spark; the warehouse queries behind it run on a real store in scripts/test.sh (`poisonwatch
report` after `dbt build`, then the same browser check on that page).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from support import browser
from support.fixtures.report_data import HOSTILE, report_data

from poisonwatch.config import PoisonwatchError
from poisonwatch.report import charts, page
from poisonwatch.report.queries import MAX_WINDOWS, choose_window
from poisonwatch.report.run import parse_duration

GENERATED = dt.datetime(2026, 11, 23, 0, 0, 0)


def _artifacts(tmp_path: Path) -> Path:
    """Where screenshots go: $POISONWATCH_TEST_ARTIFACTS (kept by CI) or the test's folder."""
    folder = Path(os.environ.get("POISONWATCH_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture(scope="module")
def full_page(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, browser.PageResult]:
    """The page with every optional section, opened once in Chromium for this module."""
    folder = tmp_path_factory.mktemp("report")
    html = folder / "report.html"
    html.write_text(page.render(report_data(), "/store/<b>x</b>", "local", GENERATED))
    shot = _artifacts(folder) / "report-fixture.png"
    return html, browser.open_page(html, screenshot=shot)


@pytest.fixture(scope="module")
def plain_page() -> str:
    """The page of a store without the optional marts (alerts, backtests)."""
    return page.render(report_data(with_optional=False), "/s", "local", GENERATED)


def test_every_chart_draws_offline_without_errors(full_page) -> None:
    html, result = full_page
    assert browser.problems(result) == []
    names = [c["name"] for c in result.probe["charts"]]
    assert names == [
        "failures", "poison", "dlq", "groups", "queues", "breakers", "actions",
        "policy-backtest",
    ]  # fmt: skip
    assert result.probe["sections"] == [
        *names[:7], "alerts", "incidents", "policy-backtest", "error-evidence",
    ]  # fmt: skip
    assert result.screenshot is not None and result.screenshot.stat().st_size > 20_000
    assert html.stat().st_size < 10 * 1024 * 1024


def test_hostile_text_is_shown_as_text(full_page) -> None:
    _, result = full_page
    text = result.probe["bodyText"]
    # Shown literally (escaped), in the tables and the header, never interpreted.
    assert "<script>alert(1)</script><img src=x onerror=alert(2)>" in text
    assert "/store/<b>x</b>" in text
    assert result.probe["scripts"] == 0
    assert result.probe["handlers"] == []


def test_the_browser_check_catches_a_broken_page(tmp_path: Path, plain_page: str) -> None:
    """The check is not blind: an empty chart, a script and a request are each reported."""
    broken = plain_page.replace(
        '<figure class="chart" data-chart="actions">',
        '<figure class="chart" data-chart="actions"></figure><figure class="x">',
        1,
    ).replace("</main>", '<img src="http://example.invalid/x.png"></main>')
    # Without the page's CSP, so that a script would run and its error show.
    broken = broken.replace('http-equiv="Content-Security-Policy"', 'name="x"')
    broken = broken.replace("</body>", "<script>throw new Error('boom')</script></body>")
    path = tmp_path / "broken.html"
    path.write_text(broken)
    found = "\n".join(browser.problems(browser.open_page(path)))
    assert "chart 'actions' did not draw" in found
    assert "boom" in found
    assert "network request: http://example.invalid/x.png" in found
    assert "<script> element" in found


def test_optional_sections_only_when_their_marts_exist(full_page, plain_page: str) -> None:
    for key in ("alerts", "incidents", "policy-backtest", "breaker-backtest", "error-evidence"):
        assert f'<section id="{key}"' not in plain_page
    assert "alert threshold" not in plain_page
    text = full_page[0].read_text()
    assert '<section id="alerts"' in text and "alert threshold" in text


def test_chart_text_is_plain() -> None:
    svg = charts.failure_groups([("com.x.E", "permanent", HOSTILE, 5, 1, 1, None, None)])
    assert "<script" not in svg and "<img" not in svg
    assert "&lt;script&gt;" in svg
    svg = charts.failure_groups([("$x$", "permanent", "$\\frac{a}{b}$", 5, 1, 1, None, None)])
    assert "$x$" in svg  # math parsing is off: a dollar sign is a dollar sign
    assert "\x1b" not in charts.label(HOSTILE)
    assert charts.label("x" * 100, 10) == "x" * 9 + "…"


def test_svg_ids_differ_between_charts() -> None:
    """Two charts in one page must not share clip-path ids."""
    import re

    a = charts.actions([("dead_letter", "pending", 3, 0)])
    b = charts.actions([("dead_letter", "pending", 3, 0)])
    assert a == b  # deterministic
    c = charts.failure_groups([("1", "transient", "m", 5, 1, 1, None, None)])
    ids_a = set(re.findall(r'id="([^"]+)"', a))
    ids_c = set(re.findall(r'id="([^"]+)"', c))
    assert ids_a and ids_c and not ids_a & ids_c
    # Every reference points at an id of its own chart.
    for svg, ids in ((a, ids_a), (c, ids_c)):
        refs = set(re.findall(r'(?:url\(#|href="#)([^)"]+)', svg))
        assert refs <= ids


def test_windows_stay_readable() -> None:
    start = dt.datetime(2026, 1, 1)
    for span in (dt.timedelta(minutes=5), dt.timedelta(hours=6), dt.timedelta(days=40)):
        w = choose_window(start, start + span)
        assert span.total_seconds() / w.seconds <= MAX_WINDOWS
    assert choose_window(start, start + dt.timedelta(hours=6)).label == "5 min"


def test_since_durations() -> None:
    assert parse_duration("90m") == 5400
    assert parse_duration("1d12h") == 129600
    assert parse_duration("2w") == 14 * 86400
    for bad in ("", "6", "h", "6x", "-1h", "0h", "1h; drop table x"):
        with pytest.raises(PoisonwatchError):
            parse_duration(bad)


def _tick_labels(svg: str, axis: str) -> list[list[str]]:
    """Per axes of a chart, in drawing order, the labels matplotlib wrote on one axis
    (`xtick` or `ytick`)."""
    import re

    groups = re.split(r'<g id="[^"]*-axes_\d+">', svg)[1:]
    pattern = rf'id="[^"]*-{axis}_\d+">.*?<text[^>]*>([^<]*)</text>'
    return [re.findall(pattern, group, re.S) for group in groups]


def _whole(labels: list[str]) -> bool:
    return bool(labels) and all(t.replace(",", "").lstrip("−-").isdigit() for t in labels)


def test_count_axes_tick_whole_numbers_even_for_small_counts() -> None:
    """One dead-lettered message in a quiet day: its axis says 0, 1, not 0.15 arrivals."""
    start = dt.datetime(2026, 11, 20, 8, 0, 0)
    end = start + dt.timedelta(hours=6)
    seconds = choose_window(start, end).seconds
    queue = {"SQL1.q/Q": [(start, 0, 0, 0, 0, 0), (end, 1, 60, 1, 1, 0)]}
    # (chart, axis, how many of its axes count things: the queue chart's third is the age)
    count_axes = {
        "dlq": (charts.dlq_arrivals([(start + (end - start) / 2, 1)], [], start, end, seconds),
                "ytick", 1),
        "failures": (charts.failures_over_time([(start, "transient", 1)], start, end, seconds),
                     "ytick", 1),
        "poison": (charts.poison_over_time([(start, "jms", "permanent_error", 1)], start, end,
                                           seconds), "ytick", 1),
        "actions": (charts.actions([("dead_letter", "pending", 1, 0)]), "xtick", 1),
        "groups": (charts.failure_groups([("1205", "transient", "deadlock", 1, 1, 1, None, None)]),
                   "xtick", 1),
        "backtest": (charts.backtest(["candidate_name", "caught"], [("current", 1), ("t2", 0)],
                                     ["caught"]), "ytick", 1),
        "queues": (charts.queue_health(queue, start, end, seconds), "ytick", 2),
    }  # fmt: skip
    for name, (svg, axis, counted) in count_axes.items():
        per_axes = _tick_labels(svg, axis)[:counted]
        assert len(per_axes) == counted, name
        for labels in per_axes:
            assert _whole(labels) and "1" in labels, (name, labels)
    # The check sees a fractional axis: the backtest's means are not counts.
    means = charts.backtest(
        ["candidate_name", "wasted_attempts_mean"], [("current", 0.25), ("t2", 0.5)],
        ["wasted_attempts_mean"],
    )  # fmt: skip
    assert not _whole(_tick_labels(means, "ytick")[0])


@pytest.mark.parametrize("width", [1024, 1400])
def test_the_page_never_scrolls_sideways(tmp_path: Path, width: int) -> None:
    """From 1,024 px up everything fits the window; a wide table scrolls in its own box."""
    html = tmp_path / "report.html"
    html.write_text(page.render(report_data(), "/store/" + "x" * 300, "local", GENERATED))
    shot = _artifacts(tmp_path) / f"report-{width}.png"
    result = browser.open_page(html, screenshot=shot, width=width)
    assert browser.problems(result) == [], width
    assert result.probe["overflowX"] == 0
    # The check is not blind: an element wider than the window is reported.
    wide = tmp_path / "wide.html"
    block = f'<div style="width:{width + 300}px">x</div></main>'
    wide.write_text(html.read_text().replace("</main>", block))
    found = "\n".join(browser.problems(browser.open_page(wide, width=width)))
    assert "scrolls sideways by" in found and f"at {width} px" in found
