"""The benchmark's view of processes: the Spark driver JVM below a Python process, and its
resident memory, from /proc (Linux)."""

from __future__ import annotations

import contextlib
from pathlib import Path


def _parent_pids() -> dict[int, int]:
    """pid → parent pid of every process we can see (from /proc/<pid>/stat)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        # The command name (2nd field) is in parentheses and may hold spaces: split after it.
        fields = text[text.rfind(")") + 2 :].split()
        parents[int(stat.parent.name)] = int(fields[1])
    return parents


def java_descendants(pid: int) -> list[int]:
    """Java processes below `pid` (the py4j gateway that runs the Spark driver)."""
    parents = _parent_pids()
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current:
                frontier.append(child)
                try:
                    comm = Path(f"/proc/{child}/comm").read_text().strip()
                except OSError:
                    continue
                if comm == "java":
                    found.append(child)
    return sorted(found)


def vm_hwm_mib(pid: int) -> float | None:
    """Peak resident set size (VmHWM) of a process, in MiB; None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def vm_rss_mib(pid: int) -> float | None:
    """Resident set size (VmRSS) of a process now, in MiB; None when it is gone."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return None
