"""One code path for every target: the runner sends Spark SQL, the engine does the work.

`local`: the embedded SparkSession (profiles.yml, method `session`).
`cluster`: a Spark Thrift Server (profiles.yml, method `thrift`), through PyHive, so landing files
readable by the cluster are read by the cluster, not pulled through Python.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from poisonwatch.config import PoisonwatchError, load_profile, spark_session, target_name


class Engine:
    """Runs Spark SQL statements; subclasses say where."""

    target: str

    def execute(self, statement: str) -> None:
        """Run a statement for its effect."""
        raise NotImplementedError

    def query(self, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        """Run a query and return (column names, rows)."""
        raise NotImplementedError

    def scalar(self, statement: str) -> Any:
        _, rows = self.query(statement)
        return rows[0][0] if rows else None

    def table_exists(self, database: str, table: str) -> bool:
        _, rows = self.query(f"show tables in `{database}` like '{table}'")
        return any(r[1] == table for r in rows)

    def close(self) -> None:
        pass


class LocalEngine(Engine):
    def __init__(self, target: str) -> None:
        self.target = target
        self.spark = spark_session(target)

    def execute(self, statement: str) -> None:
        self.spark.sql(statement).collect()

    def query(self, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        df = self.spark.sql(statement)
        return list(df.columns), [tuple(r) for r in df.collect()]


class ThriftEngine(Engine):
    def __init__(self, target: str, profile: dict[str, Any]) -> None:
        from pyhive import hive

        self.target = target
        host, port = str(profile["host"]), int(profile.get("port", 10000))
        try:
            self.conn = hive.connect(
                host=host, port=port, username=str(profile.get("user") or "poisonwatch")
            )
        except Exception as exc:
            raise PoisonwatchError(
                f"Could not reach the Spark Thrift Server at {host}:{port} (target {target!r}): "
                f"{exc}. Is it running? `poisonwatch cluster status` tells."
            ) from exc
        self.cursor = self.conn.cursor()
        for key, value in {"spark.sql.session.timeZone": "UTC"}.items():
            self.cursor.execute(f"set {key}={value}")

    def execute(self, statement: str) -> None:
        self.cursor.execute(statement)
        with contextlib.suppress(Exception):
            self.cursor.fetchall()

    def query(self, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        self.cursor.execute(statement)
        rows = [tuple(r) for r in self.cursor.fetchall()]
        columns = [d[0].split(".")[-1] for d in (self.cursor.description or [])]
        return columns, rows

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


@contextlib.contextmanager
def connect(target: str | None = None) -> Iterator[Engine]:
    """The engine of the given target (default: $POISONWATCH_TARGET or `local`)."""
    name = target_name(target)
    profile = load_profile(name)
    method = profile.get("method")
    engine: Engine
    if method == "session":
        engine = LocalEngine(name)
    elif method == "thrift":
        engine = ThriftEngine(name, profile)
    else:
        raise PoisonwatchError(f"target {name!r}: method {method!r} is not supported")
    try:
        yield engine
    finally:
        engine.close()
