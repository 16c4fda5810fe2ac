"""CPU seconds per test, for `make test`'s summary of where the suite's time goes.

With POISONWATCH_TEST_CPU_LOG set, each test appends one tab-separated line to that file: its
node id, the CPU seconds (user + system) of the worker and of every child process it waited
for during the test, and its wall seconds. On two saturated cores the CPU a test spends, not
its wall time, is what it costs the rest of the suite. scripts/test.sh prints the totals by
module (`python -m support.cpu_log FILE`).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

ENV = "POISONWATCH_TEST_CPU_LOG"


def _cpu_seconds() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    log = os.environ.get(ENV)
    cpu, wall = _cpu_seconds(), time.monotonic()
    yield
    if log:
        line = f"{item.nodeid}\t{_cpu_seconds() - cpu:.1f}\t{time.monotonic() - wall:.1f}\n"
        with open(log, "a", encoding="utf-8") as out:
            out.write(line)


def summary(path: Path, top: int = 25) -> str:
    """The modules that spent the most CPU seconds, with their wall seconds."""
    cpu: dict[str, float] = defaultdict(float)
    wall: dict[str, float] = defaultdict(float)
    for line in path.read_text(encoding="utf-8").splitlines():
        nodeid, spent, took = line.split("\t")
        module = nodeid.split("::", 1)[0]
        cpu[module] += float(spent)
        wall[module] += float(took)
    rows = sorted(cpu, key=cpu.__getitem__, reverse=True)
    lines = [f"{'module':<52} {'CPU s':>8} {'wall s':>8}"]
    lines += [f"{m[-52:]:<52} {cpu[m]:>8.0f} {wall[m]:>8.0f}" for m in rows[:top]]
    lines.append(f"{'all ' + str(len(rows)) + ' modules':<52} {sum(cpu.values()):>8.0f}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
