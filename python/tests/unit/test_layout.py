"""The package's layout rules (README "Code map"), read from the source with `ast`:

- no import cycles between modules, counting imports inside functions and under TYPE_CHECKING;
- dependencies point one way: jobs → warehouse → config (and textsafe, the other bottom module);
- a job reaches another job only through its package (`poisonwatch.ingest`), never its internals;
- test fixtures live under python/tests, not in the package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "poisonwatch"
BOTTOM = {"poisonwatch.config", "poisonwatch.textsafe"}
ENTRY = {"poisonwatch.cli", "poisonwatch.demo", "poisonwatch"}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """Every poisonwatch module `path` imports, wherever in the file the import stands."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from poisonwatch import cluster` imports the module poisonwatch.cluster
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names
            ]
        found.update(t for t in targets if t.split(".")[0] == "poisonwatch")
    # importing a.b.c runs a/__init__ and a/b/__init__ too, but those are not edges we own here
    return {t for t in found if t in known}


def graph() -> dict[str, set[str]]:
    mods = modules()
    known = set(mods)
    return {name: imports_of(path, name, known) - {name} for name, path in mods.items()}


def job_of(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) < 2 or name in BOTTOM or name in ENTRY:
        return None
    return parts[1]


def test_no_import_cycles() -> None:
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(g[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(g):
        if v not in index:
            visit(v)
    assert not cycles, f"import cycles: {cycles}"


def test_dependencies_point_one_way() -> None:
    problems = []
    for name, targets in sorted(graph().items()):
        for t in sorted(targets):
            if name in BOTTOM:
                problems.append(f"{name} (bottom layer) imports {t}")
            elif job_of(name) == "warehouse" and job_of(t) not in (None, "warehouse"):
                problems.append(f"{name} (warehouse) imports the job module {t}")
            elif (
                job_of(name)
                and job_of(t) not in (None, job_of(name), "warehouse")
                and t != f"poisonwatch.{job_of(t)}"
            ):
                problems.append(f"{name} imports {t}, an internal of another job")
            if t in ENTRY and name not in ENTRY:
                problems.append(f"{name} imports the entry point {t}")
    assert not problems, "\n".join(problems)


def test_cycle_check_sees_function_level_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function or under TYPE_CHECKING is an edge."""
    src = tmp_path / "poisonwatch" / "generate"
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    (src / "a.py").write_text("def f():\n    from poisonwatch.generate.b import g\n")
    (src / "b.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from poisonwatch.generate.a import f\n"
    )
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "poisonwatch"
    try:
        with pytest.raises(AssertionError, match="import cycles"):
            test_no_import_cycles()
    finally:
        PACKAGE = saved


def test_fixtures_live_under_tests() -> None:
    inside = [n for n in modules() if "fixture" in n.rsplit(".", 1)[-1]]
    assert not inside, f"test fixtures inside the package: {inside}"


def test_every_subpackage_says_what_it_owns() -> None:
    missing = [
        str(init.relative_to(PACKAGE))
        for init in PACKAGE.glob("*/__init__.py")
        if not (ast.get_docstring(ast.parse(init.read_text())) or "").strip()
    ]
    assert not missing, f"subpackages without a docstring: {missing}"
