"""The README is the user's guide, and it must stay true; these checks need no JVM: its length,
dates and commit ids (README and docs), the Quick start block, the code map's paths, every relative
link in the README and docs/, the order of the commands in `poisonwatch --help` and in the
README's command table, and the extractor of the `bash runnable` blocks that
integration/test_readme.py runs as written.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from support.readme_blocks import fenced_blocks, runnable_blocks

from poisonwatch.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "bench" / "README.md"]
MAX_LINES = 400
# The workflow: the one-command tour, then land → build → read → remediate → tune → operate.
WORKFLOW = (
    "demo",
    "generate",
    "collect",
    "ingest",
    "build",
    "sql",
    "report",
    "alerts",
    "verify",
    "plan",
    "apply",
    "replay",
    "resume",
    "backtest",
    "check",
    "store",
    "cluster",
    "serve",
    "bench",
)
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def section(text: str, heading: str) -> str:
    """The text of one `## heading` section, up to the next `## `."""
    match = re.search(rf"^## {re.escape(heading)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"README has no section '## {heading}'"
    return match.group(1)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = heading.strip().lower().replace("`", "")
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    return {slug(h) for h in re.findall(r"^#+ (.+)$", path.read_text(encoding="utf-8"), re.M)}


def test_readme_is_a_guide_of_at_most_400_lines() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= MAX_LINES, f"README.md has {len(lines)} lines, at most {MAX_LINES}"


def test_readme_has_at_most_one_dated_line_and_docs_none() -> None:
    dated = [line for line in README.read_text(encoding="utf-8").splitlines() if DATE.search(line)]
    assert len(dated) <= 1, f"README.md has {len(dated)} dated lines: {dated}"
    for doc in DOCS:
        found = [line for line in doc.read_text(encoding="utf-8").splitlines() if DATE.search(line)]
        assert not found, f"{doc.relative_to(ROOT)} holds dates: {found}"


def test_no_commit_ids_in_readme_or_docs() -> None:
    tokens = sorted(
        {t for path in [README, *DOCS] for t in HEX.findall(path.read_text(encoding="utf-8"))}
    )
    if not tokens:
        return
    if subprocess.run(["git", "-C", str(ROOT), "rev-parse"], capture_output=True).returncode:
        pytest.skip("not a git checkout: commit ids cannot be told from hex numbers")
    checked = subprocess.run(
        ["git", "-C", str(ROOT), "cat-file", "--batch-check"],
        input="\n".join(tokens) + "\n",
        capture_output=True,
        text=True,
        check=True,
    )
    commits = [
        token
        for token, line in zip(tokens, checked.stdout.splitlines(), strict=True)
        if line.split()[1:2] == ["commit"]
    ]
    assert not commits, f"commit ids in README.md or docs: {commits}"


def test_quick_start_is_exactly_make_demo_and_make_test() -> None:
    text = README.read_text(encoding="utf-8")
    info, body, _ = fenced_blocks(text)[0]
    assert body == "make demo\nmake test", "the README's first fenced block is not the Quick start"
    assert info == "bash"
    assert "```bash\nmake demo\nmake test\n```" in section(text, "Quick start")


def test_every_path_in_the_code_map_exists() -> None:
    blocks = fenced_blocks(section(README.read_text(encoding="utf-8"), "Code map"))
    assert blocks, "the Code map has no block"
    missing = []
    for line in blocks[0][1].splitlines():
        if not line.strip() or line.startswith(" "):
            continue  # a continuation line
        words = line.split()
        paths = [words[0]]
        while paths[-1].endswith(","):  # `a, b   what they are`
            paths.append(words[len(paths)])
        missing += [p for p in (p.rstrip(",") for p in paths) if not (ROOT / p).exists()]
    assert not missing, f"the code map names paths that do not exist: {missing}"


def test_every_relative_link_points_to_a_file_and_heading_that_exist() -> None:
    broken = []
    for path in [README, *DOCS]:
        for target in LINK.findall(path.read_text(encoding="utf-8")):
            if re.match(r"^[a-z]+:", target):
                continue  # http(s), mailto
            file_part, _, anchor = target.partition("#")
            linked = (path.parent / file_part).resolve() if file_part else path
            if not linked.exists():
                broken.append(f"{path.relative_to(ROOT)}: {target}")
            elif anchor and linked.suffix == ".md" and anchor not in anchors(linked):
                broken.append(f"{path.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, f"broken links: {broken}"


def test_help_and_readme_list_the_commands_in_workflow_order() -> None:
    parser = build_parser()
    listed = [a.dest for a in parser._subparsers._group_actions[0]._choices_actions]  # type: ignore[union-attr]
    assert tuple(listed) == WORKFLOW, f"poisonwatch --help lists {listed}"
    table = re.findall(r"^\| `poisonwatch (\w+)", section(README.read_text(), "Commands"), re.M)
    assert tuple(table) == WORKFLOW, f"the README's command table lists {table}"


def test_the_block_extractor_takes_only_bash_runnable() -> None:
    text = (
        "```bash runnable\necho one\n```\n```bash\necho two\n```\n"
        "```python runnable\nprint(3)\n```\n```bash runnable extra\necho four\n```\n"
    )
    assert [body for body, _ in runnable_blocks(text)] == ["echo one", "echo four"]
