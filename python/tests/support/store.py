"""A module's own store and Spark engine, for the modules that share one driver JVM across their
tests: `store, engine = module_store("ingest")` at module level gives the fixtures `store` and
`engine` (test_ingest, test_ingest_landing); `store = store_fixture("checks")` only the store,
for a module whose engine fixture fills it (test_checks)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from poisonwatch import config
from poisonwatch.warehouse.engine import Engine, connect


def store_fixture(name: str) -> Callable[..., Any]:
    """The fixture `store`: a folder named after `name`, with POISONWATCH_HOME and the local
    target set before Spark starts, for the whole module."""

    @pytest.fixture(scope="module", name="store")
    def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
        path = tmp_path_factory.mktemp(f"{name}-store")
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("POISONWATCH_HOME", str(path))
            mp.setenv("POISONWATCH_TARGET", "local")
            yield path

    return store


def module_store(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The fixtures `store` (store_fixture's) and `engine` (one Spark session on it for the
    module, stopped afterwards so that the next module's session opens its own store)."""
    store = store_fixture(name)

    @pytest.fixture(scope="module", name="engine")
    def engine(store: Path) -> Iterator[Engine]:
        with connect("local") as eng:
            yield eng
        config.stop_spark()

    return store, engine
