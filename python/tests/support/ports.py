"""Free loopback ports for the servers the tests start (brokers, Spark's master, Thrift)."""

from __future__ import annotations

import random
import socket
from pathlib import Path

# A port in the kernel's ephemeral range can be taken by any outgoing connection between its
# choice and the server's bind (two workers and a broker make many), so ports come from below.
_LOWEST = 20000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
_random = random.SystemRandom()


def _first_ephemeral() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A port on 127.0.0.1 that nothing has bound, below the ephemeral range if it leaves
    room (else one the kernel chooses)."""
    highest = _first_ephemeral() - 1
    if highest <= _LOWEST:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])
    for _ in range(500):
        port = _random.randint(_LOWEST, highest)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port on 127.0.0.1 between {_LOWEST} and {highest}")
