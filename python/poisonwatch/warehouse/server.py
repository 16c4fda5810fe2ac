"""Finding a running `poisonwatch serve` for this store, and taking turns with it.

The server owns the embedded store (its Derby metastore admits one JVM) and serves SQL over
Thrift on loopback. It describes itself in `$POISONWATCH_HOME/serve.json`; it is running while
it holds the store's lock file. Every other command on target `local` then sends its SQL there
instead of starting a JVM, and a command that writes takes the server's turn lock for its run,
so that it and the server's cycle never write the store at the same time.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from poisonwatch.config import home, release_file_lock

STATUS_FILE = "serve.json"
TURN_FILE = "serve.turn"
TURN_POLL_S = 0.2
# The environment variable profiles.yml's `serve` output reads its port from.
PORT_ENV = "POISONWATCH_SERVE_PORT"

# Set in the server's own process: its commands use its session, not its Thrift port.
_serving_here = False
_turn_handle: Any = None
_turn_depth = 0


@dataclass(frozen=True)
class ServerInfo:
    pid: int
    host: str
    port: int
    status: dict[str, Any]


def status_path(store: Path | None = None) -> Path:
    return (store or home()) / STATUS_FILE


def mark_serving() -> None:
    """Called by the server: this process is the server."""
    global _serving_here
    _serving_here = True


def _lock_held(path: Path) -> bool:
    """True when another process holds an flock on `path` (the store's `.lock`)."""
    try:
        fh = open(path, "rb")  # noqa: SIM115 - closed below
    except OSError:
        return False
    try:
        fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        fh.close()
    return False


def read_status(store: Path | None = None) -> dict[str, Any] | None:
    """The server's status file as written last, or None when there is none (or it is torn)."""
    try:
        data = json.loads(status_path(store).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def running_server(store: Path | None = None) -> ServerInfo | None:
    """The server running on this store, or None (none, a stale file, or this process)."""
    if _serving_here:
        return None
    store = store or home()
    status = read_status(store)
    if status is None or not _lock_held(store / ".lock"):
        return None
    try:
        info = ServerInfo(int(status["pid"]), str(status["host"]), int(status["port"]), status)
    except (KeyError, TypeError, ValueError):
        return None
    # A killed server's file stays; the lock may be held by its successor, still starting.
    return info if _alive(info.pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def write_status(status: dict[str, Any], store: Path | None = None) -> None:
    """Replace the status file whole (a reader never sees half of it)."""
    path = status_path(store)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=2, sort_keys=True, default=str) + "\n", "utf-8")
    os.replace(tmp, path)


class TurnCancelledError(Exception):
    """Waiting for the write turn was given up (`cancel` was set); nothing was written."""


@contextlib.contextmanager
def turn(holder: str, cancel: threading.Event | None = None) -> Iterator[None]:
    """Hold the store's write turn for the block (blocking: the server's cycle, or another
    command, finishes its step first). Re-entrant within a process. With `cancel`, the wait
    gives up with TurnCancelledError as soon as it is set (the server stopping on SIGTERM)."""
    global _turn_handle, _turn_depth
    if _turn_depth == 0:
        path = home() / TURN_FILE
        fh = open(path, "a+")  # noqa: SIM115 - held until the outermost block ends
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            fh.seek(0)
            other = " ".join(fh.read().split())[:200] or "another process"
            print(f"waiting for the store's write turn ({other})", file=sys.stderr, flush=True)
            if cancel is None:
                fcntl.flock(fh, fcntl.LOCK_EX)
            else:
                _wait_for_turn(fh, cancel)
        fh.seek(0)
        fh.truncate()
        fh.write(holder + "\n")
        fh.flush()
        _turn_handle = fh
    _turn_depth += 1
    try:
        yield
    finally:
        _turn_depth -= 1
        if _turn_depth == 0:
            fh, _turn_handle = _turn_handle, None
            release_file_lock(fh)


def _wait_for_turn(fh: Any, cancel: threading.Event) -> None:
    """Poll for the turn (a blocking flock is retried through signals, so SIGTERM could not end
    the wait); close the file and raise TurnCancelledError once `cancel` is set."""
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except OSError:
            if cancel.wait(TURN_POLL_S):
                fh.close()
                raise TurnCancelledError(
                    "stopped while waiting for the store's write turn"
                ) from None
