"""A real `poisonwatch cluster` for tests: a store of its own, every port picked free on
127.0.0.1 (so a cluster the user already runs is untouched), started for a block and stopped
after it by `poisonwatch cluster stop`. `Cluster` runs commands against it: the CLI, dbt with
`--target cluster` (dbt-spark `method: thrift`), beeline over JDBC and SQL through PyHive."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from support.ports import free_port

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def poisonwatch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in the project folder, its exit code left to the caller."""
    return subprocess.run(
        [str(BIN / "poisonwatch"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def cluster_env(store: Path, **extra: str) -> dict[str, str]:
    """The environment of a cluster in `store`: of the caller's Spark variables only
    SPARK_CONF_DIR, whose spark-defaults.conf (the suite's JVM and Spark settings) `cluster
    start` copies into the cluster's own; free loopback ports, dbt's own files under the store
    rather than in the shared checkout."""
    import pyspark

    env = {
        k: v
        for k, v in os.environ.items()
        if k == "SPARK_CONF_DIR" or not k.startswith(("SPARK_", "PYSPARK_"))
    }
    env.update(
        {
            "POISONWATCH_HOME": str(store),
            "POISONWATCH_TARGET": "cluster",
            "POISONWATCH_THRIFT_HOST": "127.0.0.1",
            "POISONWATCH_THRIFT_PORT": str(free_port()),
            "POISONWATCH_MASTER_PORT": str(free_port()),
            "POISONWATCH_MASTER_UI_PORT": str(free_port()),
            "POISONWATCH_THRIFT_UI_PORT": str(free_port()),
            "DBT_TARGET_PATH": str(store / "dbt_target"),
            "DBT_LOG_PATH": str(store / "logs" / "dbt"),
            "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
            "SPARK_HOME_FOR_TEST": str(Path(pyspark.__file__).parent),
            **extra,
        }
    )
    return env


@dataclass
class Cluster:
    """A running test cluster: its store, its environment, what `start` wrote, step timings."""

    store: Path
    env: dict[str, str]
    state: dict = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    stopped: bool = False

    @property
    def thrift_port(self) -> int:
        return int(self.env["POISONWATCH_THRIFT_PORT"])

    def run(
        self, args: list[str], step: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a real command; fail the test with its output when it exits non-zero."""
        start = time.monotonic()
        proc = subprocess.run(
            args, cwd=ROOT, env=env or self.env, capture_output=True, text=True, check=False
        )
        if step:
            self.timings[step] = round(time.monotonic() - start, 1)
        if proc.returncode != 0:
            pytest.fail(
                f"{' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
                f"\n--- stderr\n{proc.stderr[-6000:]}"
            )
        return proc

    def pw(self, *args: str, step: str | None = None) -> subprocess.CompletedProcess[str]:
        return self.run([str(BIN / "poisonwatch"), *args], step=step)

    def dbt(self, *args: str, step: str | None = None) -> subprocess.CompletedProcess[str]:
        project = ["--profiles-dir", str(ROOT), "--project-dir", str(ROOT)]
        return self.run([str(BIN / "dbt"), *args, "--target", "cluster", *project], step=step)

    def beeline(self, sql: str, step: str | None = None) -> subprocess.CompletedProcess[str]:
        beeline = Path(self.env["SPARK_HOME_FOR_TEST"]) / "bin" / "beeline"
        url = f"jdbc:hive2://127.0.0.1:{self.thrift_port}"
        return self.run(
            [str(beeline), "-u", url, "-n", "poisonwatch", "--silent=true", "--showHeader=true",
             "--outputformat=csv2", "-e", sql],
            step=step,
        )  # fmt: skip

    def sql_rows(self, sql: str, target: str = "cluster") -> list[dict]:
        proc = self.pw("--target", target, "sql", "--format", "json", sql)
        return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


C = TypeVar("C", bound=Cluster)


@contextmanager
def running_cluster(store: Path, workers: int, kind: type[C] = Cluster) -> Iterator[C]:
    """`poisonwatch cluster start --workers N` in `store` for the block; stopped after it
    unless a test stopped it already, and a stop that fails fails the test."""
    c = kind(store=store, env=cluster_env(store))
    c.pw("cluster", "start", "--workers", str(workers), step="cluster start")
    try:
        c.state = json.loads((store / "cluster" / "state.json").read_text())
        yield c
    finally:
        if not c.stopped:
            stop = poisonwatch(c.env, "cluster", "stop")
            c.stopped = True
            assert stop.returncode == 0, stop.stdout + stop.stderr
