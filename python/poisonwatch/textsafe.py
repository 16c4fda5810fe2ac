"""Make attacker-controlled text inert wherever it is shown.

Message bodies, error texts, queue names and exception messages come from the systems being
watched, so anyone who can send a message controls them. Before such text reaches a terminal
(rich interprets `[markup]`, terminals interpret ANSI escapes), an HTML page or a CSV cell (a
spreadsheet evaluates `=…`), it goes through one of the functions here. Bottom layer: imports
nothing of poisonwatch.
"""

from __future__ import annotations

import html as _html
import re

from rich.markup import escape as _rich_escape

# C0 and C1 control characters (tab kept), DEL, and the Unicode format characters that reorder
# or hide text: bidi embeddings/overrides/isolates (Trojan Source), zero-width marks.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
_CSV_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def neutralise(text: object, limit: int | None = None) -> str:
    """`text` as a string with control and bidi characters shown as escapes (`\\x1b`,
    `\\u202e`) and, with `limit`, cut to that many characters ending in `…`."""
    s = "" if text is None else str(text)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return _UNSAFE.sub(_visible, s)


def terminal(text: object, limit: int | None = None) -> str:
    """Safe to print through rich: no markup, no escape sequence reaches the terminal."""
    return _rich_escape(neutralise(text, limit))


def html(text: object, limit: int | None = None) -> str:
    """Safe inside HTML text or a quoted attribute."""
    return _html.escape(neutralise(text, limit), quote=True)


def csv_cell(text: object) -> str:
    """Safe as a spreadsheet cell: a leading formula character gets a `'` in front (OWASP's
    CSV-injection advice), control characters are shown as escapes."""
    s = neutralise(text)
    return "'" + s if s.startswith(_CSV_FORMULA_PREFIXES) else s
