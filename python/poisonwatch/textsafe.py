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

# C0 and C1 control characters (tab kept), DEL, and the Unicode characters that reorder, hide or
# silently alter text: bidi embeddings/overrides/isolates (Trojan Source), zero-width marks, the
# soft hyphen and Mongolian vowel separator (invisible), variation selectors (change the glyph
# of the character before them) and tag characters (invisible text smuggled after an emoji).
_FORMAT_CHARS = (
    "\x7f-\x9f\xad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u2069"
    "\ufe00-\ufe0f\ufeff\ufff9-\ufffb\U000e0000-\U000e007f\U000e0100-\U000e01ef"
)
_FORMAT = re.compile(f"[{_FORMAT_CHARS}]")
_UNSAFE = re.compile(f"[\x00-\x08\x0b-\x1f{_FORMAT_CHARS}]")
# Line breaks and tabs too, for one-line outputs (table cells, single-line messages).
_UNSAFE_ONE_LINE = re.compile(f"[\x00-\x1f{_FORMAT_CHARS}]")
# A spreadsheet starts a formula at these (and their full-width forms), also after spaces.
_CSV_FORMULA_PREFIXES = (
    "=",
    "+",
    "-",
    "@",
    "\t",
    "\r",
    "\n",
    "\uff1d",
    "\uff0b",
    "\uff0d",
    "\uff20",
)


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def _json_escape(match: re.Match[str]) -> str:
    """The character as JSON escapes: a surrogate pair beyond the BMP (JSON has no \\U)."""
    code = ord(match.group(0))
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def neutralise(text: object, limit: int | None = None, one_line: bool = False) -> str:
    """`text` as a string with control and bidi characters shown as escapes (`\\x1b`,
    `\\u202e`; with `one_line` line breaks too) and, with `limit`, cut to that many characters
    ending in `…` (before escaping, so a 1 MB error text costs only `limit`)."""
    s = "" if text is None else str(text)
    if limit is not None and len(s) > limit:
        s = s[: max(limit - 1, 0)] + "…"
    return (_UNSAFE_ONE_LINE if one_line else _UNSAFE).sub(_visible, s)


def json_text(text: str) -> str:
    """JSON text (from json.dumps) with bidi / invisible characters written as `\\uXXXX`
    escapes: the same JSON value, but a terminal or editor showing it cannot be reordered.
    (json.dumps already escapes the C0 control characters.)"""
    return _FORMAT.sub(_json_escape, text)


def terminal(text: object, limit: int | None = None, one_line: bool = True) -> str:
    """Safe to print through rich: no markup, no escape sequence reaches the terminal; with
    `one_line` (table cells) no line break either."""
    escaped = _rich_escape(neutralise(text, limit, one_line=one_line))
    # rich.markup.escape leaves a trailing backslash, which would escape the `[` of markup
    # that the caller appends (`f"{terminal(x)}[/dim]"`).
    return escaped + " " if escaped.endswith("\\") else escaped


def html(text: object, limit: int | None = None) -> str:
    """Safe inside HTML text or a quoted attribute."""
    return _html.escape(neutralise(text, limit), quote=True)


def csv_cell(text: object) -> object:
    """Safe as a spreadsheet cell: a text starting with a formula character (also after
    spaces) gets a `'` in front (OWASP's CSV-injection advice), control characters are shown
    as escapes. Numbers, booleans and None are returned as they are (a negative number stays
    a number)."""
    if text is None or isinstance(text, bool | int | float):
        return text
    s = neutralise(text)
    return "'" + s if s.lstrip(" ").startswith(_CSV_FORMULA_PREFIXES) else s


def sql_string(value: str) -> str:
    """A Spark SQL string literal for any text (backslashes and quotes escaped)."""
    escaped = value.replace("\\", "\\\\").replace("'", "\\'")
    escaped = escaped.replace("\n", "\\n").replace("\r", "\\r")
    return f"'{escaped}'"


def slack_code(text: object, limit: int | None = None) -> str:
    """Inert inside Slack's mrkdwn: one line, `&`, `<` and `>` escaped as Slack requires (no
    `<!channel>` mention or `<url|label>` link can form) and the whole set as inline code, so
    `*`, `_` and `~` format nothing (a backtick in the text becomes `'`)."""
    s = neutralise(text, limit, one_line=True).replace("`", "'")
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return f"`{s}`" if s else "-"
