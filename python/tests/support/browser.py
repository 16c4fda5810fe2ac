"""Open an HTML file in a real headless Chromium, offline, and report what it drew.

Drives Chromium over the DevTools protocol (a websocket on 127.0.0.1; `websocket-client`):
the network is switched off before the page loads, every request, console message, log entry
and uncaught exception is recorded, and a DOM probe measures each chart container. The report
forbids scripts in the page itself (Content-Security-Policy), so the probe runs through
`Runtime.evaluate`, which is the debugger's, not the page's.

Used by the report tests and, as a script, by scripts/test.sh on the report of its real store:
    python python/tests/support/browser.py REPORT.html --screenshot SHOT.png
(at 1,024 and 1,400 px wide: the page must not scroll sideways at either).
Installs Debian's `chromium` when no Chromium is on PATH (apt, under /tmp/apt.lock).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--mute-audio",
    # Nothing resolves: even a request the offline switch missed could not leave the machine.
    "--host-resolver-rules=MAP * ~NOTFOUND",
    "--remote-debugging-address=127.0.0.1",
    "--remote-debugging-port=0",
)

# Runs in the page (through the debugger): one entry per chart container.
PROBE = """(() => {
  const charts = [...document.querySelectorAll('figure.chart')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    const marks = svg ? [...svg.querySelectorAll('path, rect, use, polyline, image')]
      .filter(e => { const b = e.getBBox(); return b.width > 0 || b.height > 0; }).length : 0;
    return {name: f.dataset.chart, svg: !!svg, width: box.width, height: box.height,
            marks: marks, texts: svg ? svg.querySelectorAll('text').length : 0};
  });
  const handlers = [...document.querySelectorAll('*')].flatMap(
    e => [...e.attributes].filter(a => a.name.toLowerCase().startsWith('on')).map(a => a.name));
  return JSON.stringify({
    title: document.title,
    charts: charts,
    sections: [...document.querySelectorAll('main section')].map(s => s.id),
    scripts: document.querySelectorAll('script').length,
    handlers: handlers,
    foreign: document.querySelectorAll('iframe, object, embed, img, link[href], base').length,
    bodyText: document.body.innerText,
    height: document.documentElement.scrollHeight,
    // Wider than the viewport: the page would scroll sideways (and which elements stick out).
    overflowX: document.documentElement.scrollWidth - document.documentElement.clientWidth,
    wideElements: [...document.querySelectorAll('body *')]
      .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 0.5)
      .slice(0, 3).map(e => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '')
        + (e.className && typeof e.className === 'string' ? '.' + e.className : '')),
  });
})()"""


@dataclass
class PageResult:
    """What the browser saw."""

    probe: dict[str, Any]
    width: int = 1200  # the viewport's, in CSS pixels
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    screenshot: Path | None = None


def find_chromium(install: bool = True) -> str:
    """The Chromium binary; installs Debian's `chromium` package when none is found."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    if not install:
        raise RuntimeError("no chromium on PATH")
    subprocess.run(
        [
            "flock",
            "/tmp/apt.lock",
            "sh",
            "-c",
            "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return find_chromium(install=False)


class _Cdp:
    """A minimal DevTools protocol client: numbered commands, events queued until read."""

    def __init__(self, url: str) -> None:
        import websocket

        self.timeout = 60.0  # for a command's answer (a long page's screenshot takes seconds)
        self.ws = websocket.create_connection(url, timeout=self.timeout, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        # wait_for shortens the socket's timeout to read events: not for a command's answer.
        self.ws.settimeout(self.timeout)
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mine:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if any(e["method"] == event for e in self.events):
            return
        while time.monotonic() < deadline:
            self.ws.settimeout(max(deadline - time.monotonic(), 0.1))
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == event:
                    return
        raise TimeoutError(f"no {event} within {timeout} s")

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()


def _devtools_port(profile: Path, proc: subprocess.Popen[bytes], timeout: float) -> int:
    marker = profile / "DevToolsActivePort"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"chromium exited early with code {proc.returncode}")
        if marker.is_file():
            first = marker.read_text().splitlines()[:1]
            if first and first[0].isdigit():
                return int(first[0])
        time.sleep(0.1)
    raise TimeoutError(f"chromium did not open its DevTools port within {timeout} s")


def open_page(
    html_file: Path, screenshot: Path | None = None, width: int = 1200, timeout: float = 120
) -> PageResult:
    """Load `html_file` offline in headless Chromium; probe it; optionally save a screenshot."""
    binary = find_chromium()
    with tempfile.TemporaryDirectory(prefix="pw-chromium-") as tmp:
        profile = Path(tmp) / "profile"
        log = open(Path(tmp) / "chromium.log", "wb")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        cdp = None
        try:
            port = _devtools_port(profile, proc, timeout)
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as r:
                targets = json.load(r)
            page = next(t for t in targets if t.get("type") == "page")
            cdp = _Cdp(page["webSocketDebuggerUrl"])
            for domain in ("Page", "Runtime", "Log", "Network"):
                cdp.call(f"{domain}.enable")
            cdp.call(
                "Network.emulateNetworkConditions",
                offline=True,
                latency=0,
                downloadThroughput=-1,
                uploadThroughput=-1,
            )
            cdp.call(
                "Emulation.setDeviceMetricsOverride",
                width=width,
                height=900,
                deviceScaleFactor=1,
                mobile=False,
            )
            cdp.events.clear()
            cdp.call("Page.navigate", url=html_file.resolve().as_uri())
            cdp.wait_for("Page.loadEventFired", timeout)
            value = cdp.call("Runtime.evaluate", expression=PROBE, returnByValue=True)
            probe = json.loads(value["result"]["value"])
            result = PageResult(probe=probe, width=width)
            if screenshot is not None:
                shot = cdp.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
                screenshot.parent.mkdir(parents=True, exist_ok=True)
                screenshot.write_bytes(base64.b64decode(shot["data"]))
                result.screenshot = screenshot
            _record(cdp.events, result, html_file.resolve().as_uri())
            with contextlib.suppress(Exception):
                cdp.call("Browser.close")
            return result
        finally:
            if cdp is not None:
                cdp.close()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
            log.close()


def _record(events: list[dict[str, Any]], result: PageResult, own_url: str) -> None:
    for event in events:
        method, params = event["method"], event.get("params", {})
        if method == "Network.requestWillBeSent":
            url = params["request"]["url"]
            if url != own_url:
                result.requests.append(url)
        elif method == "Runtime.exceptionThrown":
            # The error's own description first: the details also carry the page URL, which
            # can be long enough to push the message out of a cut-off JSON dump.
            details = params.get("exceptionDetails", {})
            message = (details.get("exception") or {}).get("description") or details.get("text")
            where = f"{details.get('url', '')}:{details.get('lineNumber', '?')}"
            result.errors.append(f"{str(message)[:400]} (at {where[-200:]})")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            result.errors.append(json.dumps(params.get("args", []))[:500])
        elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
            result.errors.append(params["entry"].get("text", "")[:500])


def problems(result: PageResult) -> list[str]:
    """Everything wrong with a loaded report page (empty when it drew cleanly)."""
    found = [f"network request: {u}" for u in result.requests]
    found += [f"console error: {e}" for e in result.errors]
    probe = result.probe
    if not probe["charts"]:
        found.append("no chart container on the page")
    for chart in probe["charts"]:
        if not chart["svg"] or chart["width"] < 100 or chart["height"] < 50 or chart["marks"] < 3:
            found.append(f"chart {chart['name']!r} did not draw: {chart}")
    if probe["scripts"]:
        found.append(f"{probe['scripts']} <script> element(s) in the page")
    if probe["handlers"]:
        found.append(f"event-handler attributes in the page: {probe['handlers'][:5]}")
    if probe["foreign"]:
        found.append(f"{probe['foreign']} element(s) that could load something")
    if probe["overflowX"] > 0:
        found.append(
            f"the page scrolls sideways by {probe['overflowX']} px at {result.width} px: "
            f"{probe['wideElements']}"
        )
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("--screenshot", type=Path, help="taken at the widest viewport")
    parser.add_argument(
        "--widths", default="1024,1400", help="viewport widths to check, in CSS pixels"
    )
    args = parser.parse_args(argv)
    widths = sorted(int(w) for w in args.widths.split(","))
    found = []
    for width in widths:
        started = time.monotonic()
        shot = args.screenshot if width == widths[-1] else None
        result = open_page(args.html, shot, width=width)
        found += problems(result)
        charts = ", ".join(c["name"] for c in result.probe["charts"])
        print(
            f"{args.html} at {width} px: {len(result.probe['sections'])} sections, "
            f"charts drawn: {charts}; {time.monotonic() - started:.1f} s"
            + (f"; screenshot {shot}" if shot else "")
        )
    for problem in found:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
