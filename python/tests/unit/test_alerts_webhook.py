"""`poisonwatch alerts` without Spark: the exit code convention, JSON lines, durations, mutes,
and --webhook against a real HTTP server started here on 127.0.0.1 (a free port): an incident is
posted when it opens, when its severity changes and when it resolves, once each; a muted one
posts nothing until the mute ends; a refused post is retried on the next run; the body is
Slack-compatible and every watched-system text in it inert. The marts themselves are exercised
by dbt unit tests (alerts_retention, alert_incidents_group_a_subjects_alerts_by_the_quiet_period)
and end to end by test_serve."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any, ClassVar

import pytest
from rich.console import Console
from support.webhook import Receiver, receiving, serving

from poisonwatch.alerts import exit_code, json_lines, parse_duration, post_incident_events
from poisonwatch.alerts.incidents import lifecycle, print_incidents
from poisonwatch.alerts.mutes import active_mutes, mute, unmute
from poisonwatch.config import PoisonwatchError

NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


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


def _incident(
    incident_id: str,
    status: str = "open",
    severity: str = "critical",
    queue: str = "StalledQueue",
    detail: str = "9 messages\x1b[31m",
) -> dict[str, Any]:
    at = datetime(2026, 3, 1, 3, 30)
    return {
        "incident_id": incident_id,
        "alert_kind": "queue_stalled",
        "severity": severity,
        "broker_kind": "service_broker",
        "queue_name": queue,
        "consumer_id": None,
        "failure_group_id": None,
        "subject": queue,
        "first_seen_at": at,
        "last_seen_at": at,
        "resolved_at": at + timedelta(minutes=30) if status == "resolved" else None,
        "status": status,
        "alert_count": 2,
        "detail": detail,
        "owner_team": "expenses",
        "owner_channel": "#expenses-oncall",
        "evaluated_at": at,
    }


def _post(
    incidents: list[dict[str, Any]], url: str, ledger: Path, **kw: Any
) -> tuple[list[str], list[str]]:
    return post_incident_events(incidents, url, ledger, kw.pop("mutes", {}), **kw)


def _events() -> list[tuple[str, str, str]]:
    return [(b["incident"]["incident_id"], b["event"], b["incident"]["severity"])
            for b in Receiver.received]  # fmt: skip


def test_an_incident_is_posted_when_it_opens_changes_severity_and_resolves(
    server: str, tmp_path: Path
) -> None:
    ledger = tmp_path / "posted.jsonl"
    first = [_incident("i1", severity="warning"), _incident("q1", status="quiet"),
             _incident("r0", status="resolved")]  # fmt: skip
    # open and quiet incidents open; one resolved before it was ever posted stays silent
    assert _post(first, server, ledger) == (["i1#opened", "q1#opened"], [])
    assert _post(first, server, ledger) == ([], [])
    # an update without a severity change posts nothing; a change posts once
    bumped = [{**_incident("i1", severity="warning"), "alert_count": 5}]
    assert _post(bumped, server, ledger) == ([], [])
    assert _post([_incident("i1")], server, ledger) == (["i1#severity"], [])
    assert _post([_incident("i1")], server, ledger) == ([], [])
    # quiet is not resolved; resolved posts once, and nothing after
    assert _post([_incident("i1", status="quiet")], server, ledger) == ([], [])
    done = [_incident("i1", status="resolved"), _incident("q1", status="resolved")]
    assert _post(done, server, ledger) == (["i1#resolved", "q1#resolved"], [])
    assert _post(done, server, ledger) == ([], [])
    assert _events() == [
        ("i1", "opened", "warning"),
        ("q1", "opened", "critical"),
        ("i1", "severity", "critical"),
        ("i1", "resolved", "critical"),
        ("q1", "resolved", "critical"),
    ]
    # the lifecycle beside the incident: each post made, in order
    life = lifecycle([_incident("i1", status="resolved")], ledger, {})[0]
    assert [p["event"] for p in life["posts"]] == ["opened", "severity", "resolved"]
    assert life["muted"] is None


def test_the_body_is_slack_compatible_names_the_owner_and_keeps_texts_inert(
    server: str, tmp_path: Path
) -> None:
    evil = "<!channel> *Q* `x` <https://evil.example|click> & \u202e"
    _post([_incident("s1", queue=evil, detail=evil)], server, tmp_path / "l.jsonl")
    (body,) = Receiver.received
    assert body["event"] == "opened"
    assert body["owner"] == {"team": "expenses", "channel": "#expenses-oncall"}
    assert body["incident"]["queue_name"] == evil  # the data itself, escaped only by JSON
    shown = [body["text"]] + [
        t
        for block in body["blocks"]
        for t in [block.get("text", {}).get("text", "")]
        + [f["text"] for f in block.get("fields", [])]
        + [e["text"] for e in block.get("elements", [])]
    ]
    assert {b["type"] for b in body["blocks"]} == {"section", "context"}
    assert "expenses" in body["text"] and "#expenses-oncall" in body["text"]
    for text in shown:
        assert "<!channel>" not in text and "<https://" not in text and "\u202e" not in text
    assert any("`&lt;!channel&gt; *Q* 'x' &lt;https://evil.example|click&gt; &amp; " in t
               for t in shown)  # fmt: skip


def test_a_muted_incident_posts_nothing_until_the_mute_ends(server: str, tmp_path: Path) -> None:
    ledger, mutes = tmp_path / "posted.jsonl", tmp_path / "mutes.jsonl"
    mute(mutes, "queue_stalled", "StalledQueue", timedelta(hours=2), "draining by hand", NOW)
    running = active_mutes(mutes, NOW + timedelta(minutes=30))
    assert _post([_incident("m1"), _incident("o1", queue="Other")], server, ledger,
                 mutes=running) == (["o1#opened"], [])  # fmt: skip
    life = lifecycle([_incident("m1")], ledger, running)[0]
    assert life["muted"]["reason"] == "draining by hand" and life["posts"] == []
    # two hours on, the mute has ended by itself: what is due is posted now
    over = active_mutes(mutes, NOW + timedelta(hours=2))
    assert over == {}
    assert _post([_incident("m1")], server, ledger, mutes=over) == (["m1#opened"], [])
    # muted again: its resolution waits for the mute to end, then is posted once
    mute(mutes, "queue_stalled", "StalledQueue", timedelta(hours=1), "again", NOW)
    again = active_mutes(mutes, NOW + timedelta(minutes=1))
    resolved = [_incident("m1", status="resolved")]
    assert _post(resolved, server, ledger, mutes=again) == ([], [])
    assert unmute(mutes, "queue_stalled", "StalledQueue", NOW + timedelta(minutes=2))
    after = active_mutes(mutes, NOW + timedelta(minutes=3))
    assert not unmute(mutes, "queue_stalled", "StalledQueue", NOW + timedelta(minutes=3))
    assert _post(resolved, server, ledger, mutes=after) == (["m1#resolved"], [])
    assert [e[:2] for e in _events()] == [("o1", "opened"), ("m1", "opened"), ("m1", "resolved")]


def test_a_mute_needs_a_subject_a_duration_and_a_reason(tmp_path: Path) -> None:
    path = tmp_path / "mutes.jsonl"
    with pytest.raises(PoisonwatchError, match="reason"):
        mute(path, "queue_stalled", "Q", timedelta(hours=1), " ", NOW)
    with pytest.raises(PoisonwatchError, match="SUBJECT"):
        mute(path, "queue_stalled", "", timedelta(hours=1), "why", NOW)
    with pytest.raises(PoisonwatchError, match="--for"):
        mute(path, "queue_stalled", "Q", timedelta(0), "why", NOW)
    assert not path.exists()
    path.write_text('{"alert_kind": "queue_stalled", "subj\n')  # torn by a crash
    assert active_mutes(path, NOW) == {}


def test_a_refused_post_is_retried_next_run(server: str, tmp_path: Path) -> None:
    ledger = tmp_path / "posted.jsonl"
    Receiver.refuse_next = 1
    posted, errors = _post([_incident("b1")], server, ledger)
    assert posted == [] and len(errors) == 1 and "503" in errors[0]
    assert _post([_incident("b1")], server, ledger) == (["b1#opened"], [])


def test_webhook_url_must_be_http(tmp_path: Path) -> None:
    with pytest.raises(PoisonwatchError, match="http:// or https://"):
        _post([_incident("c1")], "file:///etc/passwd", tmp_path / "l.jsonl")


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


def test_durations() -> None:
    assert parse_duration("90m") == timedelta(minutes=90)
    assert parse_duration("1h30m") == timedelta(minutes=90)
    assert parse_duration("7d") == timedelta(days=7)
    for bad in ("", "soon", "5", "2w"):
        with pytest.raises(PoisonwatchError, match="not a duration"):
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
    posted, errors = _post([_incident("d1")], f"http://{tricky}/moved/{code}", ledger)
    assert posted == []
    assert len(errors) == 1 and f"HTTP {code}" in errors[0] and "not followed" in errors[0]
    assert "LOCSECRET" not in errors[0]
    assert [(m, p) for m, p, _ in _Tricky.seen] == [("POST", f"/moved/{code}")]
    assert not ledger.exists() or "d1" not in ledger.read_text()


def test_one_deadline_bounds_a_slowly_answered_post(tricky: str, tmp_path: Path) -> None:
    start = time.monotonic()
    posted, errors = _post(
        [_incident("e1")], f"http://{tricky}/drip", tmp_path / "posted.jsonl", timeout=1.5
    )
    elapsed = time.monotonic() - start
    assert posted == [] and len(errors) == 1 and "within 1.5 s" in errors[0], errors
    assert elapsed < 4, f"the post took {elapsed:.1f} s against a 1.5 s deadline"


def test_the_urls_secret_parts_are_never_stored_or_shown(tricky: str, tmp_path: Path) -> None:
    ledger = tmp_path / "alerts" / "posted.jsonl"
    base = f"http://alice:PWSECRET@{tricky}"
    query = "?token=QSECRET#FRAGSECRET"
    refused, errors = _post([_incident("f1")], f"{base}/down/PATHSECRET{query}", ledger)
    assert refused == [] and len(errors) == 1 and "HTTP 503" in errors[0]
    posted, more = _post([_incident("f1")], f"{base}/ok/PATHSECRET{query}", ledger)
    assert (posted, more) == (["f1#opened"], [])
    # The userinfo went to the server as Basic credentials, not into the host name.
    assert _Tricky.seen[-1][:2] == ("POST", "/ok/PATHSECRET?token=QSECRET")
    assert _Tricky.seen[-1][2] == "Basic YWxpY2U6UFdTRUNSRVQ="
    text = ledger.read_text()
    for leaked in ("PWSECRET", "alice", "PATHSECRET", "QSECRET", "FRAGSECRET"):
        assert leaked not in text and leaked not in errors[0], leaked
    assert [json.loads(line)["url"] for line in text.splitlines()] == [f"http://…@{tricky}/…?…#…"]
    assert errors[0].startswith(f"f1: http://…@{tricky}/…?…#…: ")
    assert ledger.stat().st_mode & 0o777 == 0o600
    with pytest.raises(PoisonwatchError) as refused_scheme:
        _post([_incident("h1")], "ftp://bob:PWSECRET@host/PATHSECRET", ledger)
    assert "PWSECRET" not in str(refused_scheme.value)
    assert "PATHSECRET" not in str(refused_scheme.value)


def test_incidents_print_in_80_columns_inert_with_their_mute(tmp_path: Path) -> None:
    mutes = tmp_path / "mutes.jsonl"
    group = "3aa46317c92c" + "f" * 52
    grouped = {**_incident("g1", status="resolved"), "alert_kind": "new_failure_group",
               "queue_name": None, "failure_group_id": group, "subject": group}  # fmt: skip
    mute(mutes, "new_failure_group", group[:12], timedelta(hours=1), "[red]known[/red]", NOW)
    listed = lifecycle(
        [_incident("h1", queue="Q\x1b[2J[bold]x"), grouped],
        tmp_path / "none.jsonl",
        active_mutes(mutes, NOW),
    )
    assert listed[0]["muted"] is None and listed[1]["muted"]["reason"] == "[red]known[/red]"
    console = Console(width=80, record=True, file=io.StringIO())
    print_incidents(listed, console)
    screen = console.export_text()
    assert all(len(line) <= 80 for line in screen.splitlines())
    assert "queue_stalled Q\\x1b[2J[bold]x (open since 2026-03-01 03:30 UTC" in screen
    assert "group 3aa46317c92c (resolved at 2026-03-01 04:00 UTC" in screen
    assert "muted until" in screen and "[red]known[/red]" in screen
    assert "owner expenses #expenses-oncall" in screen and "\x1b" not in screen


def test_an_incident_whose_id_moves_with_the_lookback_is_not_posted_again(
    server: str, tmp_path: Path
) -> None:
    """Its first alert left the lookback: a later first_seen_at, so a new id. The ledger follows
    it by kind and subject: no second opening, and its resolution is posted once."""
    ledger = tmp_path / "posted.jsonl"
    assert _post([_incident("old")], server, ledger) == (["old#opened"], [])
    moved = _incident("new")
    assert _post([moved], server, ledger) == ([], [])
    assert _post([{**moved, "severity": "warning"}], server, ledger) == (["new#severity"], [])
    resolved = {**moved, "severity": "warning", "status": "resolved"}
    assert _post([resolved], server, ledger) == (["new#resolved"], [])
    # another subject's incident is its own
    assert _post([_incident("other", queue="Q2")], server, ledger) == (["other#opened"], [])
    life = lifecycle([resolved], ledger, {})[0]
    assert [(p["event"], p["from"]) for p in life["posts"]] == [
        ("continued", "old"),
        ("severity", None),
        ("resolved", None),
    ]


def test_a_line_cut_by_a_crash_does_not_swallow_the_next(server: str, tmp_path: Path) -> None:
    ledger, mutes = tmp_path / "posted.jsonl", tmp_path / "mutes.jsonl"
    ledger.write_text('{"incident_id": "x1", "event": "ope')
    assert _post([_incident("t1")], server, ledger) == (["t1#opened"], [])
    assert _post([_incident("t1")], server, ledger) == ([], [])
    mutes.write_text('{"alert_kind": "queue_stalled", "sub')
    mute(mutes, "queue_stalled", "StalledQueue", timedelta(hours=1), "why", NOW)
    assert list(active_mutes(mutes, NOW)) == [("queue_stalled", "StalledQueue")]
    assert mutes.stat().st_mode & 0o777 == 0o600


def test_the_alert_ledger_of_before_counts_as_posted(server: str, tmp_path: Path) -> None:
    """An incident's id is its first alert's id: posted alerts are incidents posted open."""
    ledger = tmp_path / "alerts" / "incidents_posted.jsonl"
    ledger.parent.mkdir()
    (ledger.parent / "webhook_posted.jsonl").write_text(
        json.dumps({"alert_id": "a1", "url": "http://…"}) + "\n"
        + json.dumps({"alert_id": "a2", "url": "http://…"}) + "\n"
        + json.dumps({"alert_id": "a2", "status": "resolved", "url": "http://…"}) + "\n"
    )  # fmt: skip
    incidents = [_incident("a1"), _incident("a2", status="resolved"), _incident("a3")]
    assert _post(incidents, server, ledger) == (["a3#opened"], [])
    assert _post([_incident("a1", status="resolved")], server, ledger) == (["a1#resolved"], [])


def test_json_lines_keep_bidi_and_c1_controls_as_escapes() -> None:
    (line,) = json_lines([{**_alert("a1"), "detail": "x\u202ey\x9b31m"}])
    assert "\u202e" not in line and "\x9b" not in line
    assert json.loads(line)["detail"] == "x\u202ey\x9b31m"
