"""Read a T-SQL script the way sqlcmd reads it before SQL Server sees it (test support).

sqlcmd (ODBC and go-sqlcmd) works line by line: a line that is `GO` (with an optional count)
ends a batch, a line starting with `:` (or one of the colon-less legacy commands `!!`, `ed`,
`reset`, `exit`, `quit`) is a sqlcmd command, and `$(name)` is a variable reference anywhere,
inside string literals too. Commands and separators count only outside quotes and comments,
so the quote state matters; it is tracked twice:

- `tsql`: SQL Server's rules ('' doubles a quote inside '…', "…" and […] are identifiers,
  `--` and nested `/* */` comments). A `\\` right before a line break inside '…' is a line
  continuation (both vanish), reported in `continuations`.
- `go`: go-sqlcmd's scanner, where `\\` escapes the next character inside '…', "…" is a string,
  brackets are not special and `/* */` does not nest.

A script is inert when both readings agree and find only the template's own batches and
commands. `literal_value` evaluates the `N'…' + NCHAR(n) + …` expressions the scripts carry
values in, to check that a value arrives exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Line breaks some reader of the file may honour (SSMS's editor also breaks at NEL, LS and PS).
LINE_BREAKS = re.compile(r"\r\n|\n|\r")
OTHER_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
SEPARATOR = re.compile(r"[ \t]*go(?:[ \t]+(\d+))?[ \t]*", re.IGNORECASE)
COMMAND = re.compile(r"[ \t]*(?::|!!|(?:ed|reset|exit|quit)(?![\w@#$]))", re.IGNORECASE)
VARIABLE = re.compile(r"\$\(")


@dataclass
class Reading:
    """What one reader (`tsql` or `go` quote rules) found."""

    batches: list[str] = field(default_factory=list)
    separators: list[tuple[int, int]] = field(default_factory=list)  # (line, repeat count)
    commands: list[tuple[int, str]] = field(default_factory=list)  # (line, text)
    continuations: list[int] = field(default_factory=list)  # lines ending in `\` inside '…'
    unterminated: str | None = None  # the quote or comment still open at the end


@dataclass
class Scan:
    lines: list[str]
    variables: list[tuple[int, str]]  # (line, text from `$(`), in any state
    other_breaks: list[tuple[int, str]]  # (line, character) NEL, LS, PS, VT, FF, FS, GS, RS
    tsql: Reading
    go: Reading

    @property
    def agree(self) -> bool:
        return (
            self.tsql.batches == self.go.batches
            and self.tsql.separators == self.go.separators
            and self.tsql.commands == self.go.commands
        )


def _read(lines: list[str], mode: str) -> Reading:
    out = Reading()
    quote: str | None = None  # "'", '"', "[" (tsql only)
    depth = 0  # /* */ nesting
    batch: list[str] = []
    for number, line in enumerate(lines, start=1):
        if quote is None and depth == 0:
            sep = SEPARATOR.fullmatch(line)
            if sep:
                out.batches.append("\n".join(batch))
                batch = []
                out.separators.append((number, int(sep.group(1) or 1)))
                continue
            if COMMAND.match(line):
                out.commands.append((number, line))
                continue
        batch.append(line)
        i = 0
        while i < len(line):
            c, nxt = line[i], line[i + 1 : i + 2]
            if depth:
                if c == "*" and nxt == "/":
                    depth, i = depth - 1, i + 2
                    continue
                if c == "/" and nxt == "*" and mode == "tsql":
                    depth, i = depth + 1, i + 2
                    continue
                i += 1
                continue
            if quote == "'":
                if mode == "go" and c == "\\":
                    i += 2
                    continue
                if c == "'":
                    if nxt == "'":
                        i += 2
                        continue
                    quote = None
                i += 1
                continue
            if quote is not None:
                close = "]" if quote == "[" else quote
                if c == close:
                    if nxt == close:
                        i += 2
                        continue
                    quote = None
                i += 1
                continue
            if c == "-" and nxt == "-":
                break
            if c == "/" and nxt == "*":
                depth, i = 1, i + 2
                continue
            if c in "'\"" or (c == "[" and mode == "tsql"):
                quote = c
            i += 1
        if quote == "'" and mode == "tsql" and line.endswith("\\"):
            out.continuations.append(number)
    out.batches.append("\n".join(batch))
    out.batches = [b for b in out.batches if b.strip()]
    if quote is not None:
        out.unterminated = quote
    elif depth:
        out.unterminated = "/*"
    return out


def scan(script: str) -> Scan:
    lines = LINE_BREAKS.split(script)
    if lines and lines[-1] == "":
        lines.pop()
    variables = [
        (n, line[m.start() : m.start() + 40])
        for n, line in enumerate(lines, start=1)
        for m in VARIABLE.finditer(line)
    ]
    other = [
        (n, m.group()) for n, line in enumerate(lines, start=1) for m in OTHER_BREAKS.finditer(line)
    ]
    return Scan(lines, variables, other, _read(lines, "tsql"), _read(lines, "go"))


_PIECE = re.compile(r"\s*(?:N'((?:[^']|'')*)'|NCHAR\((\d+)\))\s*")


def literal_value(expression: str) -> str:
    """The value of a T-SQL string expression made of N'…' literals and NCHAR(n) joined by
    `+` (what the scripts carry values in); ValueError for anything else."""
    value, pos = [], 0
    while True:
        m = _PIECE.match(expression, pos)
        if not m:
            raise ValueError(f"not a literal expression at {expression[pos : pos + 40]!r}")
        value.append(
            m.group(1).replace("''", "'") if m.group(1) is not None else chr(int(m.group(2)))
        )
        pos = m.end()
        if pos == len(expression):
            return "".join(value)
        if expression[pos] != "+":
            raise ValueError(f"expected + at {expression[pos : pos + 40]!r}")
        pos += 1
