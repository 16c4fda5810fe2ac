"""Comments say why the code is as it is; history and figures stay out of the project's files.

Read from the files alone (no JVM):

- no date (YYYY-MM-DD), CI run number (`CI42`), issue number (`issue 18`) or id of a commit of
  this repository in the comments and YAML descriptions of models/, macros/, scripts/,
  profiles.yml and dbt_project.yml (data such as a unit test's timestamps is not checked);
- no comment that cites a timing (a number followed by s, ms, min or CPU-s) or says what was
  "measured" in models/, macros/, scripts/, profiles.yml and python/poisonwatch/;
- no JVM flag (`-XX:`) in profiles.yml: tuning for the test machine lives in scripts/test.sh's
  Spark configuration folder, not in the profile a user runs.
"""

from __future__ import annotations

import ast
import io
import re
import shutil
import subprocess
import tokenize
from collections.abc import Iterator
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
HISTORY_PLACES = ("models", "macros", "scripts", "profiles.yml", "dbt_project.yml")
TIMING_PLACES = ("models", "macros", "scripts", "profiles.yml", "python/poisonwatch")
SUFFIXES = {".sql", ".yml", ".yaml", ".sh", ".py"}

DATE = re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b")
CI_RUN = re.compile(r"\bCI ?\d+\b")
ISSUE = re.compile(r"\bissues? #?\d+\b", re.IGNORECASE)
# A hex word with a digit in it: the candidates for a commit id (`git cat-file` decides).
HEX_WORD = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,40}\b")
# A figure with a unit of time: "12 s", "0.6-1.1 s", "192 CPU-s", "40ms", "3 min"; not a quoted
# duration such as '90s', which documents an input format.
TIMING = re.compile(
    r"(?<!['\"`])\b\d+(?:[.,]\d+)*\s?(?:ms|s|min|mins|CPU-s|seconds?|minutes?)(?![\w-])"
    r"|\bmeasured\b",
    re.IGNORECASE,
)

Text = tuple[int, str]  # (line number, text)


def files(places: tuple[str, ...]) -> Iterator[Path]:
    for place in places:
        path = ROOT / place
        if path.is_file():
            yield path
        else:
            yield from sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in SUFFIXES)


def _spans(text: str, pattern: re.Pattern[str]) -> Iterator[Text]:
    """Each match of `pattern` (its group 1 when it has one), split into numbered lines."""
    for match in pattern.finditer(text):
        group = 1 if pattern.groups else 0
        start = match.start(group)
        first = text.count("\n", 0, start) + 1
        for i, line in enumerate(match.group(group).split("\n")):
            yield first + i, line


SQL_COMMENT = re.compile(r"\{#(.*?)#\}|/\*(.*?)\*/|--([^\n]*)", re.DOTALL)
HASH_COMMENT = re.compile(r"(?:^|[ \t])#(?![!{])([^\n]*)", re.MULTILINE)


def sql_comments(text: str) -> Iterator[Text]:
    for match in SQL_COMMENT.finditer(text):
        group = next(g for g in (1, 2, 3) if match.group(g) is not None)
        first = text.count("\n", 0, match.start(group)) + 1
        for i, line in enumerate(match.group(group).split("\n")):
            yield first + i, line


def hash_comments(text: str) -> Iterator[Text]:
    """`#` comments of YAML and shell (not `${#x}`, `$#` or a shebang)."""
    for number, line in _spans(text, HASH_COMMENT):
        if not (number == 1 and line.startswith("!")):
            yield number, line


def yaml_descriptions(text: str) -> Iterator[Text]:
    """The `description:` values of a dbt YAML file: documentation, like comments."""
    stack = list(yaml.compose_all(text))
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if key.value == "description" and isinstance(value, yaml.ScalarNode):
                    for i, line in enumerate(value.value.split("\n")):
                        yield value.start_mark.line + 1 + i, line
                else:
                    stack.append(value)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)


def python_comments(text: str) -> Iterator[Text]:
    """`#` comments and docstrings."""
    for token in tokenize.generate_tokens(io.StringIO(text).readline):
        if token.type == tokenize.COMMENT:
            yield token.start[0], token.string
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if (
                body
                and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)
            ):
                for i, line in enumerate(body[0].value.value.split("\n")):
                    yield body[0].lineno + i, line


def comments(path: Path, descriptions: bool = True) -> Iterator[Text]:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".sql":
        yield from sql_comments(text)
    elif path.suffix in (".yml", ".yaml"):
        yield from hash_comments(text)
        if descriptions:
            yield from yaml_descriptions(text)
    elif path.suffix == ".sh":
        yield from hash_comments(text)
    elif path.suffix == ".py":
        yield from python_comments(text)


def where(path: Path, number: int, line: str) -> str:
    return f"{path.relative_to(ROOT)}:{number}: {line.strip()[:160]}"


def real_commits(words: set[str]) -> set[str]:
    """The words that name a commit of this repository."""
    git = shutil.which("git")
    assert git, "git is needed to tell commit ids from other hex words"
    assert (ROOT / ".git").exists(), f"{ROOT} is not a git checkout"
    ordered = sorted(words)
    out = subprocess.run(
        [git, "cat-file", "--batch-check=%(objecttype)"],
        input="".join(f"{w}^{{commit}}\n" for w in ordered),
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    ).stdout.splitlines()
    assert len(out) == len(ordered), out
    return {w for w, kind in zip(ordered, out, strict=True) if kind == "commit"}


def test_no_dates_ci_runs_or_issue_numbers_in_comments() -> None:
    found = [
        where(path, number, line)
        for path in files(HISTORY_PLACES)
        for number, line in comments(path)
        if DATE.search(line) or CI_RUN.search(line) or ISSUE.search(line)
    ]
    assert not found, "history in comments (it belongs in commit messages):\n" + "\n".join(found)


def test_no_commit_ids() -> None:
    """Anywhere in the files, not only comments: a commit id means nothing to the code."""
    hits: dict[str, list[str]] = {}
    for path in files(HISTORY_PLACES):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for word in HEX_WORD.findall(line):
                hits.setdefault(word, []).append(where(path, number, line))
    found = [hit for word in sorted(real_commits(set(hits))) for hit in hits[word]]
    assert not found, "commit ids (they belong in commit messages):\n" + "\n".join(found)


def test_no_comment_cites_a_timing() -> None:
    found = [
        where(path, number, line)
        for path in files(TIMING_PLACES)
        for number, line in comments(path, descriptions=False)
        if TIMING.search(line)
    ]
    assert not found, "timings in comments (they belong in bench results):\n" + "\n".join(found)


def test_profile_has_no_jvm_flags() -> None:
    text = (ROOT / "profiles.yml").read_text(encoding="utf-8")
    found = [
        f"profiles.yml:{n}: {line.strip()[:160]}"
        for n, line in enumerate(text.splitlines(), 1)
        if "-XX:" in line
    ]
    assert not found, "JVM flags in profiles.yml (test tuning goes in scripts/test.sh):\n" + (
        "\n".join(found)
    )


def test_the_patterns_tell_history_and_timings_from_code() -> None:
    """The checks fire on what they are for and not on code that looks alike."""
    assert DATE.search("a store from before 2026-11-29")
    assert CI_RUN.search("in CI43 it ended") and ISSUE.search("(issue 18)")
    assert not CI_RUN.search("CI=true") and not ISSUE.search("issues show")
    for timing in ("took 12 s", "0.6-1.1 s per model", "192 -> 143 CPU-s", "40ms", "3 min"):
        assert TIMING.search(timing), timing
    for code in ("timeout_s", "5-second", "10M attempts", "p95s", "x2s", "'90s', '2h'"):
        assert not TIMING.search(code), code
    sql = "select 1 -- took 3 s\n{# why #} from t where ts > '2026-01-01' /* a\nb */"
    assert list(sql_comments(sql)) == [(1, " took 3 s"), (2, " why "), (2, " a"), (3, "b ")]
    assert list(sql_comments("select ts + interval 5 minutes -- why\n")) == [(1, " why")]
    shell = '#!/bin/bash\necho "${#a[@]}" $# # why\n  # also\n'
    assert list(hash_comments(shell)) == [(2, " why"), (3, " also")]
    doc = "models:\n  - name: m\n    description: one\n    columns: [{name: c, description: two}]\n"
    assert sorted(yaml_descriptions(doc)) == [(3, "one"), (4, "two")]
    assert HEX_WORD.findall("at 0a1b2c3 and deadbeef, 1234567, e29059bb-9922") == [
        "0a1b2c3",
        "e29059bb",
    ]
