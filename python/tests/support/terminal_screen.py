"""Run a command under a pseudo-terminal of 80 columns and check what a person would see.

The command's output (stdout and stderr, as a terminal gets them) is replayed through `pyte`, a
VT100 emulator, on a screen much wider than the 80 columns the command is told about: live
status lines that redraw themselves end up as the one line a person sees, and a line the
command printed wider than 80 columns stays visible as such instead of wrapping.

Checks (`problems`): no line wider than 80; no dbt log line on the terminal; no non-blank
line printed twice; the closing summary (from the "demo finished" rule on) at most 40 lines.

As a script (scripts/test.sh runs the demo this way):
    python python/tests/support/terminal_screen.py --transcript OUT.txt -- poisonwatch demo …
prints the screen, then the problems, and exits 1 if there are any (or the command failed).
"""

from __future__ import annotations

import argparse
import fcntl
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from dataclasses import dataclass
from pathlib import Path

COLUMNS = 80
ROWS = 50
SUMMARY_LIMIT = 40
# Lines of dbt's own console log: "12:00:01  3 of 297 START …", "Finished running …", "Done. PASS=".
DBT_LOG = re.compile(r"^\d\d:\d\d:\d\d\s|\b\d+ of \d+ (START|OK|PASS|ERROR|FAIL)\b|Done\. PASS=")


@dataclass
class Screen:
    """The lines a person saw (scrollback and screen, trailing blanks dropped), and the exit."""

    lines: list[str]
    returncode: int
    seconds: float


def run_in_terminal(
    argv: list[str], env: dict[str, str] | None = None, timeout: float = 3600
) -> Screen:
    """Run `argv` with a pty of COLUMNS x ROWS as its terminal; return what it displayed."""
    import pyte

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", ROWS, COLUMNS, 0, 0))
    child_env = {**(env or os.environ), "COLUMNS": str(COLUMNS), "LINES": str(ROWS)}
    child_env.setdefault("TERM", "xterm-256color")
    child_env.pop("NO_COLOR", None)
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, stdin=slave, stdout=slave, stderr=slave, env=child_env, start_new_session=True
    )
    os.close(slave)
    # Wide emulator: what the command printed past column 80 stays visible.
    screen = pyte.HistoryScreen(COLUMNS * 4, ROWS, history=100_000, ratio=0.5)
    screen.set_mode(pyte.modes.LNM)  # a pty turns "\n" into "\r\n"
    stream = pyte.ByteStream(screen)
    deadline = started + timeout
    try:
        while True:
            if time.monotonic() > deadline:
                proc.kill()
                raise TimeoutError(f"{argv[:3]} did not finish within {timeout} s")
            ready, _, _ = select.select([master], [], [], 1.0)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not data:
                    break
                stream.feed(data)
            elif proc.poll() is not None:
                break
    finally:
        os.close(master)
    returncode = proc.wait()
    lines = [_line(row, screen.columns) for row in screen.history.top]
    lines += [line.rstrip() for line in screen.display]
    while lines and not lines[-1].strip():
        lines.pop()
    return Screen(lines, returncode, time.monotonic() - started)


def _line(row: dict[int, object], columns: int) -> str:
    return "".join(row[x].data if x in row else " " for x in range(columns)).rstrip()  # type: ignore[attr-defined]


def summary_lines(lines: list[str]) -> list[str]:
    """The demo's closing summary: from its "demo finished" rule to the end."""
    starts = [i for i, line in enumerate(lines) if "demo finished" in line]
    return lines[starts[-1] :] if starts else []


def problems(screen: Screen, expect_summary: bool = True) -> list[str]:
    found = []
    for n, line in enumerate(screen.lines, 1):
        if len(line) > COLUMNS:
            found.append(f"line {n} is {len(line)} columns wide: {line[:100]!r}")
        if DBT_LOG.search(line):
            found.append(f"line {n} is dbt's log: {line[:100]!r}")
    seen: dict[str, int] = {}
    for n, line in enumerate(screen.lines, 1):
        key = line.strip()
        if len(key) < 8 or set(key) <= set("─━-=│ "):
            continue
        if key in seen:
            found.append(f"line {n} repeats line {seen[key]}: {key[:100]!r}")
        seen.setdefault(key, n)
    if expect_summary:
        summary = summary_lines(screen.lines)
        if not summary:
            found.append("no closing summary ('demo finished …')")
        elif len(summary) > SUMMARY_LIMIT:
            found.append(f"the closing summary has {len(summary)} lines (at most {SUMMARY_LIMIT})")
    if screen.returncode != 0:
        found.append(f"the command exited with {screen.returncode}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--transcript", type=Path, help="write the screen's lines here")
    parser.add_argument("--no-summary", action="store_true", help="no closing summary expected")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    screen = run_in_terminal(command)
    text = "\n".join(screen.lines) + "\n"
    if args.transcript:
        args.transcript.write_text(text)
    sys.stdout.write(text)
    found = problems(screen, expect_summary=not args.no_summary)
    print(
        f"[terminal check] {len(screen.lines)} lines at {COLUMNS} columns, "
        f"summary {len(summary_lines(screen.lines))} lines, {screen.seconds:.0f} s"
    )
    for problem in found:
        print(f"PROBLEM: {problem}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
