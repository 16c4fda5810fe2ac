"""Fixtures shared by several test modules."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.child_python import SharedChild

# A skip under CI=true fails the run (ci_strict.py says why).
from support.ci_strict import pytest_runtest_makereport  # noqa: F401


@pytest.fixture(scope="session")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedChild]:
    """One child process with its Spark JVM and a store of its own, for the modules whose
    scripts build small fixtures (databases and temp views of their own names) and compile
    macros against them: test_carry_window, test_generic_tests, test_remediation_sql,
    test_rewrite_segments, test_test_scope, test_watermark; and
    test_carried_runs, the only one that ingests and builds project models (the two run models
    and what they read). It starts on first use and ends with the session."""
    child = SharedChild(tmp_path_factory.mktemp("shared-store"))
    yield child
    child.close()
