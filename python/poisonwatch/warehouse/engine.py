"""One code path for every target: the runner sends Spark SQL, the engine does the work.

`local`: the embedded SparkSession (profiles.yml, method `session`).
`cluster`: a Spark Thrift Server (profiles.yml, method `thrift`), through PyHive, so landing files
readable by the cluster are read by the cluster, not pulled through Python.
`local` while `poisonwatch serve` runs on the store: the server's Thrift port, the same way
(poisonwatch.warehouse.server).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from typing import Any

from pyhive.exc import OperationalError

from poisonwatch.config import PoisonwatchError, load_profile, spark_session, target_name
from poisonwatch.warehouse.server import running_server, turn


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
        """Whether `database`.`table` exists; false too when the database is missing (a store
        never built), which Spark answers with an error."""
        try:
            _, rows = self.query(f"show tables in `{database}` like '{table}'")
        except Exception:
            _, databases = self.query(f"show databases like '{database}'")
            if databases:
                raise
            return False
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


def _server_message(text: str | None) -> str:
    """The server's error without its Java stack trace and Hive wrapper prefix."""
    if not text:
        return ""
    text = text.split("\n\tat ", 1)[0].strip()
    return re.sub(
        r"^org\.apache\.hive\.service\.cli\.HiveSQLException: (Error running query: )?", "", text
    )


class ThriftSqlError(OperationalError, PoisonwatchError):
    """A statement failed on the Thrift server: a DB-API OperationalError, printed plainly."""


class ThriftEngine(Engine):
    def __init__(
        self,
        target: str,
        profile: dict[str, Any],
        hint: str = "Is it running? `poisonwatch cluster status` tells.",
    ) -> None:
        from pyhive import hive

        self.target = target
        self.profile, self.hint = profile, hint
        host, port = str(profile["host"]), int(profile.get("port", 10000))
        try:
            self.conn = hive.connect(
                host=host, port=port, username=str(profile.get("user") or "poisonwatch")
            )
        except Exception as exc:
            raise PoisonwatchError(
                f"Could not reach the Spark Thrift Server at {host}:{port} (target {target!r}): "
                f"{exc}. {hint}"
            ) from exc
        self.cursor = self.conn.cursor()
        for key, value in {"spark.sql.session.timeZone": "UTC"}.items():
            self.cursor.execute(f"set {key}={value}")

    def twin(self) -> ThriftEngine:
        """A connection of its own to the same server (one is not shared between threads)."""
        return ThriftEngine(self.target, self.profile, self.hint)

    def _run(self, statement: str) -> None:
        """Submit asynchronously and poll until done.

        A synchronous call can be dropped by the server after a few minutes (dbt-spark polls for
        the same reason); polling starts fast so short statements do not wait for a fixed interval.
        """
        from TCLIService.ttypes import TOperationState

        pending = (
            TOperationState.INITIALIZED_STATE,
            TOperationState.PENDING_STATE,
            TOperationState.RUNNING_STATE,
        )
        self.cursor.execute(statement, async_=True)
        delay = 0.02
        while True:
            status = self.cursor.poll(get_progress_update=False)
            if status.operationState not in pending:
                break
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
        if status.operationState != TOperationState.FINISHED_STATE:
            state = TOperationState._VALUES_TO_NAMES.get(status.operationState, "?")
            raise ThriftSqlError(
                f"{_server_message(status.errorMessage) or state}\n(target {self.target!r}, "
                f"statement: {statement.strip()[:300]})"
            )

    def execute(self, statement: str) -> None:
        self._run(statement)
        with contextlib.suppress(Exception):
            self.cursor.fetchall()

    def query(self, statement: str) -> tuple[list[str], list[tuple[Any, ...]]]:
        self._run(statement)
        rows = [tuple(r) for r in self.cursor.fetchall()]
        columns = [d[0].split(".")[-1] for d in (self.cursor.description or [])]
        return columns, rows

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.close()


@contextlib.contextmanager
def connect(target: str | None = None, reads_only: bool = False) -> Iterator[Engine]:
    """The engine of the given target (default: $POISONWATCH_TARGET or `local`).

    On `local` while `poisonwatch serve` runs on the store, the server's Thrift port; unless
    `reads_only`, the block holds the server's turn lock, so it writes between its cycles.
    """
    name = target_name(target)
    profile = load_profile(name)
    method = profile.get("method")
    served = running_server() if method == "session" else None
    if served is not None:
        with contextlib.ExitStack() as stack:
            if not reads_only:
                stack.enter_context(turn(f"poisonwatch pid {os.getpid()}"))
            remote = ThriftEngine(
                name,
                {"host": served.host, "port": served.port},
                hint=f"`poisonwatch serve` (pid {served.pid}) owns the store: is it stopping?",
            )
            stack.callback(remote.close)
            yield remote
        return
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
