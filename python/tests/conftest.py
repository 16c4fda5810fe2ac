"""Session set-up shared by every test module.

scripts/test.sh runs pytest with pytest-xdist (`-n 2 --dist loadfile`): each module runs whole on
one worker process, beside a module on the other worker. The modules that start Spark make stores
of their own (tmp_path_factory, which xdist gives a folder per worker), ports are free ones, and
Chromium gets a profile of its own; the store of the environment, which a test that forgets to
set its own would share, is made one per worker here, before any module imports Spark, so that
two workers never open the same Derby metastore.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker:
    _base = os.environ.get("POISONWATCH_HOME") or str(
        Path(__file__).resolve().parents[2] / ".poisonwatch" / "pytest"
    )
    os.environ["POISONWATCH_HOME"] = f"{_base}-{_worker}"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with a `slow` test first (each keeps its own order of tests): under xdist each
    worker takes modules in this order, and a long module that started last would leave one
    worker running it alone at the end."""
    slow = {item.module.__name__ for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: item.module.__name__ not in slow)
