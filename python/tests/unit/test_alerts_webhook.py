"""`poisonwatch alerts` without Spark: the exit code convention, JSON lines, --since parsing,
and --webhook against a real HTTP server started here on 127.0.0.1 (a free port): each new open
alert is posted once, again only under a new id (resolved and fired anew), and a refused post is
retried on the next run. The mart itself is exercised by dbt unit tests (alerts_at_each_threshold)
and by the alerts steps of scripts/test.sh."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from support.webhook import Receiver, receiving, serving

from poisonwatch.alerts import exit_code, json_lines, parse_duration, post_new_alerts
from poisonwatch.config import PoisonwatchError


@pytest.fixture()
def server() -> Iterator[str]:
    with receiving() as url:
        yield url


def _alert(alert_id: str, status: str = "open", severity: str = "critical") -> dict[str, Any]:
    at = datetime(2026, 3, 1, 3, 30)
    return {
        "alert_id": alert_id,
        "alert_kind": "queue_stalled",
        "severity": severity,
        "queue_name": "StalledQueue",
        "status": status,
        "first_seen_at": at,
        "last_seen_at": at,
        "evaluated_at": at,
        "detail": "9 messages\x1b[31m",
    }


def test_each_new_alert_is_posted_once(server: str, tmp_path: Path) -> None:
    ledger = tmp_path / "posted.jsonl"
    alerts = [_alert("a1"), _alert("a2", severity="warning"), _alert("r1", status="resolved")]
    posted, errors = post_new_alerts(alerts, server, ledger)
    assert (posted, errors) == (["a1", "a2"], [])
    assert [a["alert_id"] for a in Receiver.received] == ["a1", "a2"]
    assert Receiver.received[0]["detail"] == "9 messages\x1b[31m"  # data, escaped by JSON
    # a second run with the same alerts posts nothing
    assert post_new_alerts(alerts, server, ledger) == ([], [])
    # the alert resolved and fired anew: a new id, posted again
    again = [_alert("a1", status="resolved"), _alert("a1-again")]
    assert post_new_alerts(again, server, ledger) == (["a1-again"], [])
    assert len(Receiver.received) == 3


def test_with_resolved_a_posted_alert_is_posted_again_once_when_it_resolves(
    server: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "posted.jsonl"
    first = [_alert("a1"), _alert("r0", status="resolved")]
    assert post_new_alerts(first, server, ledger, resolved=True) == (["a1"], [])
    later = [_alert("a1", status="resolved"), _alert("r0", status="resolved")]
    # a1 was posted open: its resolution follows, once; r0 was never posted open: nothing
    assert post_new_alerts(later, server, ledger, resolved=True) == (["a1#resolved"], [])
    assert post_new_alerts(later, server, ledger, resolved=True) == ([], [])
    assert [(a["alert_id"], a["status"]) for a in Receiver.received] == [
        ("a1", "open"),
        ("a1", "resolved"),
    ]
    # without `resolved` (the `alerts --webhook` command) resolutions are not posted
    assert post_new_alerts([_alert("a2")], server, ledger) == (["a2"], [])
    assert post_new_alerts([_alert("a2", status="resolved")], server, ledger) == ([], [])


def test_a_refused_post_is_retried_next_run(server: str, tmp_path: Path) -> None:
    ledger = tmp_path / "posted.jsonl"
    Receiver.refuse_next = 1
    posted, errors = post_new_alerts([_alert("b1")], server, ledger)
    assert posted == [] and len(errors) == 1 and "503" in errors[0]
    assert post_new_alerts([_alert("b1")], server, ledger) == (["b1"], [])


def test_webhook_url_must_be_http(tmp_path: Path) -> None:
    with pytest.raises(PoisonwatchError, match="http:// or https://"):
        post_new_alerts([_alert("c1")], "file:///etc/passwd", tmp_path / "l.jsonl")


def test_exit_code_follows_the_monitoring_plugin_convention() -> None:
    assert exit_code([]) == 0
    assert exit_code([_alert("x", status="resolved")]) == 0
    assert exit_code([_alert("x", severity="warning")]) == 1
    assert exit_code([_alert("x", severity="warning"), _alert("y")]) == 2


def test_json_lines_one_object_per_line() -> None:
    lines = json_lines([_alert("a1"), _alert("a2")])
    assert len(lines) == 2
    assert [json.loads(x)["alert_id"] for x in lines] == ["a1", "a2"]
    assert json.loads(lines[0])["first_seen_at"] == "2026-03-01T03:30:00"


def test_since_durations() -> None:
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("7d") == timedelta(days=7)
    for bad in ("", "soon", "5", "2w"):
        with pytest.raises(PoisonwatchError, match="--since"):
            parse_duration(bad)


class _Tricky(BaseHTTPRequestHandler):
    """Redirects (`/moved/<code>` → `/landed`), an answer dripped a byte at a time (`/drip`),
    and a hook that accepts (`/ok/...`) or refuses (`/down/...`) the POST."""

    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[tuple[str, str, str]]] = []

    def _record(self) -> None:
        _Tricky.seen.append((self.command, self.path, self.headers.get("Authorization", "")))
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)

    def do_GET(self) -> None:
        self._record()
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        self._record()
        if self.path.startswith("/moved/"):
            self.send_response(int(self.path.rsplit("/", 1)[1]))
            self.send_header("Location", "/landed?token=LOCSECRET")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/drip":
            # Each byte well within any per-read timeout; the whole answer never completes.
            end = time.monotonic() + 20
            try:
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"x" * 1000:
                    if time.monotonic() > end:
                        break
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass  # the client gave up: what it should do
            self.close_connection = True
        else:
            self.send_response(204 if self.path.startswith("/ok/") else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def tricky() -> Iterator[str]:
    _Tricky.seen = []
    with serving(_Tricky) as address:
        yield address


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_a_redirect_is_not_followed_nor_counted_delivered(
    tricky: str, tmp_path: Path, code: int
) -> None:
    ledger = tmp_path / "posted.jsonl"
    posted, errors = post_new_alerts([_alert("d1")], f"http://{tricky}/moved/{code}", ledger)
    assert posted == []
    assert len(errors) == 1 and f"HTTP {code}" in errors[0] and "not followed" in errors[0]
    assert "LOCSECRET" not in errors[0]
    assert [(m, p) for m, p, _ in _Tricky.seen] == [("POST", f"/moved/{code}")]
    assert not ledger.exists() or "d1" not in ledger.read_text()


def test_one_deadline_bounds_a_slowly_answered_post(tricky: str, tmp_path: Path) -> None:
    start = time.monotonic()
    posted, errors = post_new_alerts(
        [_alert("e1")], f"http://{tricky}/drip", tmp_path / "posted.jsonl", timeout=1.5
    )
    elapsed = time.monotonic() - start
    assert posted == [] and len(errors) == 1 and "within 1.5 s" in errors[0], errors
    assert elapsed < 4, f"the post took {elapsed:.1f} s against a 1.5 s deadline"


def test_the_urls_secret_parts_are_never_stored_or_shown(tricky: str, tmp_path: Path) -> None:
    ledger = tmp_path / "alerts" / "posted.jsonl"
    secret = "https://hooks.example.com/services/T1/B2/PATHSECRET"
    # A ledger of an earlier version holds a full URL, readable by everyone: it is rewritten.
    ledger.parent.mkdir()
    ledger.write_text(json.dumps({"alert_id": "old", "url": secret + "?q=QSECRET"}) + "\n")
    ledger.chmod(0o644)
    base = f"http://alice:PWSECRET@{tricky}"
    query = "?token=QSECRET#FRAGSECRET"
    refused, errors = post_new_alerts([_alert("f1")], f"{base}/down/PATHSECRET{query}", ledger)
    assert refused == [] and len(errors) == 1 and "HTTP 503" in errors[0]
    posted, more = post_new_alerts([_alert("f1")], f"{base}/ok/PATHSECRET{query}", ledger)
    assert (posted, more) == (["f1"], [])
    # The userinfo went to the server as Basic credentials, not into the host name.
    assert _Tricky.seen[-1][:2] == ("POST", "/ok/PATHSECRET?token=QSECRET")
    assert _Tricky.seen[-1][2] == "Basic YWxpY2U6UFdTRUNSRVQ="
    text = ledger.read_text()
    for leaked in ("PWSECRET", "alice", "PATHSECRET", "QSECRET", "FRAGSECRET", "services"):
        assert leaked not in text and leaked not in errors[0], leaked
    assert [json.loads(line)["url"] for line in text.splitlines()] == [
        "https://hooks.example.com/…?…",
        f"http://…@{tricky}/…?…#…",
    ]
    assert errors[0].startswith(f"f1: http://…@{tricky}/…?…#…: ")
    assert ledger.stat().st_mode & 0o777 == 0o600
    fresh = tmp_path / "new" / "posted.jsonl"
    post_new_alerts([_alert("g1")], f"http://{tricky}/ok/x", fresh)
    assert fresh.stat().st_mode & 0o777 == 0o600
    with pytest.raises(PoisonwatchError) as refused_scheme:
        post_new_alerts([_alert("h1")], "ftp://bob:PWSECRET@host/PATHSECRET", fresh)
    assert "PWSECRET" not in str(refused_scheme.value)
    assert "PATHSECRET" not in str(refused_scheme.value)
