"""The README's fenced blocks and which of them are `bash runnable`: read by the test that runs
them (integration/test_readme.py) and by the one that checks the extractor (unit/)."""

from __future__ import annotations

import re


def fenced_blocks(text: str) -> list[tuple[str, str, int]]:
    """(info string, body, line number of the opening fence) of every ``` block, in order."""
    blocks, lines, i = [], text.splitlines(), 0
    while i < len(lines):
        opening = re.match(r"^```(.*)$", lines[i])
        if opening:
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append((opening.group(1).strip(), "\n".join(body), start))
        i += 1
    return blocks


def runnable_blocks(text: str) -> list[tuple[str, int]]:
    """The `bash runnable` blocks (GitHub renders the first word of the info string)."""
    return [
        (body, line)
        for info, body, line in fenced_blocks(text)
        if info.split()[:1] == ["bash"] and "runnable" in info.split()[1:]
    ]
