"""The terminal listing shared by alerts and incidents: one entry per row, by severity."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table


def print_by_severity(
    entries: list[tuple[str, str]], empty: str, console: Console | None = None
) -> None:
    """(severity, markup) entries as CRIT / WARN and the text folded beside it, in 80 columns;
    `empty` when there is none."""
    console = console or Console(width=80)
    if not entries:
        console.print(empty)
        return
    grid = Table.grid(padding=(0, 1))
    grid.add_column(width=4, no_wrap=True)
    grid.add_column(overflow="fold")
    for severity, text in entries:
        grid.add_row("CRIT" if severity == "critical" else "WARN", text)
    console.print(grid)
