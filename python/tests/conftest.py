"""Fixtures shared by several test modules, and the order `make test`'s workers take them in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Under pytest-xdist (`make test` runs two workers) each worker gets a store of its own: the
# embedded Derby metastore lets one process in at a time.
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("POISONWATCH_HOME"):
    os.environ["POISONWATCH_HOME"] += "-" + os.environ["PYTEST_XDIST_WORKER"]
from support.child_python import SharedChild

# A skip under CI=true fails the run (ci_strict.py says why).
from support.ci_strict import pytest_runtest_makereport  # noqa: F401

# The modules that take longest, longest first (from the durations `make test` prints): the
# workers take whole modules (`--dist loadfile --no-loadscope-reorder`) in collection order, so
# starting these first keeps one worker from being left with a long module at the end. Every
# other module follows in its usual order.
LONGEST_FIRST = (
    "integration/test_remediation_apply.py",
    "integration/test_readme.py",
    "integration/test_orphan_batches.py",
    "integration/test_seed_examples.py",
    "e2e/test_broker_e2e.py",
    "e2e/test_serve.py",
    "integration/test_incremental.py",
    "e2e/test_cluster_security.py",
    "integration/test_bench_spark.py",
    "e2e/test_artemis_oracle.py",
    "integration/test_store.py",
    "integration/test_build_spark.py",
    "integration/test_ingest.py",
    "integration/test_checks.py",
    "integration/test_ingest_committed.py",
    "integration/test_generic_tests.py",
    "integration/test_carried_runs.py",
    "integration/test_remediation_sql.py",
)
TESTS = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        name = item.path.relative_to(TESTS).as_posix()
        return LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: a module's tests keep their order


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
