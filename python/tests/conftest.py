"""Fixtures shared by several test modules, and the order `make test`'s workers take them in."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Under pytest-xdist (`make test` runs two workers) each worker gets a store of its own: the
# embedded Derby metastore lets one process in at a time.
if os.environ.get("PYTEST_XDIST_WORKER") and os.environ.get("POISONWATCH_HOME"):
    os.environ["POISONWATCH_HOME"] += "-" + os.environ["PYTEST_XDIST_WORKER"]
from support.child_python import SharedChild

# A skip under CI=true fails the run (ci_strict.py says why).
from support.ci_strict import pytest_runtest_makereport  # noqa: F401

# With POISONWATCH_TEST_CPU_LOG set, each test's CPU seconds are logged (cpu_log.py says why).
from support.cpu_log import pytest_runtest_protocol  # noqa: F401

# The work units that take longest, longest first (module totals from the durations `make test`
# prints): the workers take whole units (`--dist loadfile --no-loadscope-reorder`; the modules on
# the shared store are one unit, "shared-store") in collection order, so starting these first
# keeps one worker from being left with a long unit at the end. Every other module follows in
# its usual order.
LONGEST_FIRST = (
    "integration/test_remediation_apply.py",
    "integration/test_readme.py",
    "integration/test_bench_spark.py",
    "e2e/test_broker_e2e.py",
    "integration/test_incremental.py",
    "integration/test_seed_examples.py",
    "integration/test_orphan_batches.py",
    "shared-store",
    "e2e/test_artemis_oracle.py",
    "e2e/test_cluster_security.py",
    "integration/test_store.py",
    "integration/test_build_spark.py",
    "e2e/test_serve.py",
    "e2e/test_serve_broker.py",
    "integration/test_ingest_committed.py",
    "integration/test_checks.py",
    "integration/test_ingest.py",
)
# The modules that use `shared_store`: one work unit, so that one worker starts its child and
# dbt parses the project once for all of them (pytest_collection_modifyitems checks the list).
SHARED_STORE_MODULES = frozenset(
    {
        "integration/test_carried_runs.py",
        "integration/test_carry_window.py",
        "integration/test_generic_tests.py",
        "integration/test_key_encoding.py",
        "integration/test_remediation_sql.py",
        "integration/test_rewrite_segments.py",
        "integration/test_serve_port.py",
        "integration/test_test_scope.py",
        "integration/test_watermark.py",
    }
)
TESTS = Path(__file__).resolve().parent


def _unit(module: str) -> str:
    """The work unit of a module named relative to TESTS."""
    return "shared-store" if module in SHARED_STORE_MODULES else module


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadfile`, except that the modules on the shared store are one unit. (xdist's
    `loadgroup` would do this with marks, but it renames node ids in a way pytest 9.2 ignores.)"""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            path = (config.rootpath / module).resolve()
            if not path.is_relative_to(TESTS):
                return module
            return _unit(path.relative_to(TESTS).as_posix())

    return ModuleScheduling(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        unit = _unit(item.path.relative_to(TESTS).as_posix())
        return LONGEST_FIRST.index(unit) if unit in LONGEST_FIRST else len(LONGEST_FIRST)

    items.sort(key=rank)  # stable: a module's tests keep their order
    unlisted = {
        item.path.relative_to(TESTS).as_posix()
        for item in items
        if "shared_store" in item.fixturenames
    } - SHARED_STORE_MODULES
    if unlisted:
        raise pytest.UsageError(f"add to conftest.py's SHARED_STORE_MODULES: {sorted(unlisted)}")


@pytest.fixture(scope="session")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedChild]:
    """One child process with its Spark JVM and a store of its own, for SHARED_STORE_MODULES:
    most build small fixtures (databases and temp views of their own names) and compile macros
    against them; test_serve_port starts and stops a Thrift server in it; test_carried_runs is
    the only one that ingests and builds project models (the two run models and what they
    read). It starts on first use and ends with the session."""
    child = SharedChild(tmp_path_factory.mktemp("shared-store"))
    yield child
    child.close()
