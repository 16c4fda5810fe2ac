"""The README is the user's guide, and it must stay true: its commands run as written.

The fenced blocks whose info string is `bash runnable` are run, in order, with bash in one temp
folder with a store of their own (the venv's `poisonwatch` first on PATH, the text unchanged), on
the small landing the first block generates: a command that fails fails the test. Blocks that need
a broker or a cluster are not marked runnable. The other checks need no JVM: the README's length,
dates and commit ids (README and docs), the Quick start block, the code map's paths, every relative
link in the README and docs/, and the order of the commands in `poisonwatch --help` and in the
README's command table.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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
    "backtest",
    "check",
    "store",
    "cluster",
    "bench",
)
DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


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


# ---------------------------------------------------------------------------------------------
# No JVM
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# The runnable blocks, for real (each `poisonwatch` call starts a Spark JVM: minutes)
# ---------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_runnable_blocks_run_as_written(tmp_path: Path) -> None:
    blocks = runnable_blocks(README.read_text(encoding="utf-8"))
    assert len(blocks) >= 4, "the Examples, plan/apply, alerts and report blocks are runnable"
    assert "poisonwatch generate" in blocks[0][0], "the first runnable block makes the landing"
    work, home, tmp = tmp_path / "work", tmp_path / "home", tmp_path / "tmp"
    for folder in (work, home, tmp):
        folder.mkdir()
    venv_bin = Path(sys.executable).parent
    env = {
        **os.environ,
        "PATH": f"{venv_bin}{os.pathsep}{os.environ.get('PATH', '')}",
        "POISONWATCH_HOME": str(home),
        "POISONWATCH_TARGET": "local",
        "TMPDIR": str(tmp),
        "COLUMNS": "120",
    }
    env.pop("POISONWATCH_PROJECT_DIR", None)
    for number, (body, line) in enumerate(blocks, 1):
        script = tmp_path / f"block-{number}.sh"
        script.write_text(body + "\n", encoding="utf-8")
        result = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-x", str(script)],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert result.returncode == 0, (
            f"README.md line {line}: runnable block {number} failed "
            f"(exit {result.returncode}):\n{body}\n--- output (tail):\n"
            + (result.stdout + result.stderr)[-6000:]
        )
