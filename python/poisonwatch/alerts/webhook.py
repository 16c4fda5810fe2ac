"""POST JSON to a webhook, and the ledger file of what was posted (`alerts.incidents` decides
what to post).

A webhook URL is a credential (Slack, Teams and Discord put their token in the path; others put
one in the query or the userinfo), so only its redacted form (`redact`: scheme, host and port)
is ever stored or printed, and the ledger is readable by its owner only. A post is delivered only
on a 2xx answer to the POST itself: a redirect is never followed (a 301/302/303 would turn the
POST into a GET that "succeeds"; a 307/308 would send the alert to wherever the server says), and
one deadline bounds the whole post, however slowly the server answers.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import json
import os
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

# What is read of an answer's body: enough to drain a small reply, never a server's whole stream.
_BODY_LIMIT = 64 * 1024


def redact(url: str) -> str:
    """The URL without its secret parts: userinfo, path, query and fragment are each replaced by
    `…`, so `https://u:p@hooks.example.com:8443/services/T1/B2/tok?x=1` becomes
    `https://…@hooks.example.com:8443/…?…`."""
    try:
        parts = urllib.parse.urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(an unreadable URL)"
    if ":" in host:
        host = f"[{host}]"
    out = f"{parts.scheme}://" if parts.scheme else ""
    if "@" in parts.netloc:
        out += "…@"
    out += host + (f":{port}" if port is not None else "")
    if parts.path not in ("", "/"):
        out += "/…"
    if parts.query:
        out += "?…"
    if parts.fragment:
        out += "#…"
    return out


class _Deadline:
    """Shuts down every socket of one post when its deadline passes, so no slow answer (a byte
    every few seconds) can hold a post longer than the deadline."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def left(self) -> float:
        return max(self.end - time.monotonic(), 0.001)

    def watch(self, sock: socket.socket | None) -> None:
        if sock is None:
            return
        with self._lock:
            self._sockets.append(sock)
            expired = self.expired
        if expired:
            self._shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            sockets = list(self._sockets)
        for sock in sockets:
            self._shut(sock)

    @staticmethod
    def _shut(sock: socket.socket) -> None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


class _RedirectRefusedError(Exception):
    """The server answered with a redirect, which is not followed."""

    def __init__(self, code: int, location: str) -> None:
        super().__init__(code, location)
        self.code = code
        self.location = location


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(
        self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str
    ) -> None:
        fp.close()
        raise _RedirectRefusedError(code, newurl)


class _HTTPHandler(urllib.request.HTTPHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def http_open(self, req: Any) -> Any:
        deadline = self.deadline

        class Connection(http.client.HTTPConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        return self.do_open(Connection, req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def __init__(self, deadline: _Deadline) -> None:
        super().__init__()
        self.deadline = deadline

    def https_open(self, req: Any) -> Any:
        deadline = self.deadline

        class Connection(http.client.HTTPSConnection):
            def connect(self) -> None:
                super().connect()
                deadline.watch(self.sock)

        return self.do_open(Connection, req, context=self._context)


def post_json(url: str, body: bytes, timeout: float) -> str | None:
    """POST `body` to `url`; None when delivered (a 2xx), else why not (no secret in it)."""
    parts = urllib.parse.urlsplit(url)
    headers = {"Content-Type": "application/json"}
    if parts.username is not None or parts.password is not None:
        # urllib cannot send userinfo itself: it becomes a Basic authorisation header.
        user = urllib.parse.unquote(parts.username or "")
        password = urllib.parse.unquote(parts.password or "")
        token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
        headers["Authorization"] = f"Basic {token}"
        netloc = parts.netloc.rsplit("@", 1)[1]
        url = urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    request = urllib.request.Request(url, data=body, method="POST", headers=headers)
    with _Deadline(timeout) as deadline:
        opener = urllib.request.build_opener(
            _NoRedirect, _HTTPHandler(deadline), _HTTPSHandler(deadline)
        )
        try:
            with opener.open(request, timeout=deadline.left()) as response:
                status = response.status
                response.read(_BODY_LIMIT)
        except _RedirectRefusedError as exc:
            return (
                f"HTTP {exc.code}: a redirect to {redact(exc.location)}, not followed; set "
                "--webhook to the URL that accepts the POST itself"
            )
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}"
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
            if deadline.expired:
                return f"no complete answer within {timeout:g} s"
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            return f"{type(reason).__name__}: {reason}".replace(url, redact(url))
    if deadline.expired:
        return f"no complete answer within {timeout:g} s"
    if not 200 <= status < 300:
        return f"HTTP {status}"
    return None


def read_ledger(ledger: Path) -> list[dict[str, Any]]:
    """The ledger's entries in order; a line a crash cut short (not a JSON object) is skipped."""
    entries = []
    if ledger.exists():
        for line in ledger.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict):
                entries.append(entry)
    return entries


def open_ledger(ledger: Path) -> Any:
    """The ledger for appending, created readable and writable by its owner only."""
    ledger.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(ledger, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
    if os.fstat(fd).st_mode & 0o077:
        os.fchmod(fd, 0o600)
    size = os.fstat(fd).st_size
    # A line a crash cut short would swallow the next one: end it first.
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")
    return os.fdopen(fd, "a", encoding="utf-8")
