"""dbt called from a child script of `child_python` (`run_py`, `SharedChild`; the tests folder
is on its PYTHONPATH): one way to compile a Jinja expression against that child's store."""

from __future__ import annotations

from dbt.cli.main import dbtRunner

from poisonwatch.config import home, project_root


def compile_inline(inline: str) -> str:
    """The compiled text of `dbt compile --inline` on the local target (macros run for real,
    so their run_query calls read the child's store)."""
    root, store = str(project_root()), home()
    res = dbtRunner().invoke(
        [
            "compile", "--inline", inline,
            "--project-dir", root, "--profiles-dir", root, "--target", "local", "--quiet",
            "--target-path", str(store / "dbt_target"), "--log-path", str(store / "logs"),
        ]
    )  # fmt: skip
    assert res.success and res.result is not None, res.exception
    return res.result.results[0].node.compiled_code
