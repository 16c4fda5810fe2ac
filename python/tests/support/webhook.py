"""A webhook receiver for tests: a real HTTP server on 127.0.0.1 (a free port) that records each
POSTed JSON body, and can refuse the next few posts with 503."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar


class Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[dict[str, Any]]] = []
    refuse_next = 0

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if Receiver.refuse_next:
            Receiver.refuse_next -= 1
            self.send_response(503)
            self.end_headers()
            return
        Receiver.received.append(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def serving(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """Run an HTTP server with `handler` on 127.0.0.1 for the block; yields `host:port`."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@contextmanager
def receiving() -> Iterator[str]:
    """Run a Receiver for the block (its records emptied first); yields its URL."""
    Receiver.received = []
    Receiver.refuse_next = 0
    with serving(Receiver) as address:
        yield f"http://{address}/hook"
