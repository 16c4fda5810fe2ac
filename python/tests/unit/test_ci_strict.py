"""A skipped test fails the run under CI=true and stays a skip outside CI (no JVM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]

INNER_TESTS = """
import pytest

def test_runs():
    assert True

@pytest.mark.skipif(True, reason="no broker here")
def test_needs_a_broker():
    pass

def test_skips_itself():
    pytest.skip("needs the previous test")

@pytest.mark.xfail(reason="known", strict=False)
def test_expected_to_fail():
    assert False
"""


def _run(tmp_path: Path, ci: str | None) -> subprocess.CompletedProcess[str]:
    (tmp_path / "conftest.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from support.ci_strict import pytest_runtest_makereport  # noqa: F401\n"
    )
    (tmp_path / "test_inner.py").write_text(INNER_TESTS)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(tmp_path)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_skip_fails_under_ci(tmp_path: Path) -> None:
    proc = _run(tmp_path, "true")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in out, out
    assert "skipped under CI=true, which counts as a failure: no broker here" in out, out
    assert "needs the previous test" in out, out


def test_a_skip_stays_a_skip_outside_ci(tmp_path: Path) -> None:
    proc = _run(tmp_path, None)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "1 passed, 2 skipped, 1 xfailed" in out, out
