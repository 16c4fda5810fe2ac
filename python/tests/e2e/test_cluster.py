"""The same project on a real multi-process Spark cluster on 127.0.0.1 (marker `cluster`).

`poisonwatch cluster start` brings up a standalone master, two workers and a Thrift server from the
pyspark wheel; everything after that goes through the `cluster` target: the runner's SQL (PyHive),
dbt-spark `method: thrift`, and beeline over JDBC. The tests run in file order and share one
cluster (start-up is the slow part): lifecycle → generate → ingest → dbt build → labels →
plan/apply → beeline → same marts as the embedded default → stop, leaving no process behind.

Run on its own with `.venv/bin/pytest -m cluster -s` (step times are printed and written to
`<store>/cluster-timings.json`). Ports are picked free, so a cluster you already run is untouched.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.cluster import BIN, ROOT, Cluster, poisonwatch, running_cluster
from support.ports import free_port

from poisonwatch.config import MARTS

SEED = int(os.environ.get("POISONWATCH_CLUSTER_TEST_SEED", "7"))
ATTEMPTS = int(os.environ.get("POISONWATCH_CLUSTER_TEST_ATTEMPTS", "6000"))

pytestmark = [pytest.mark.cluster, pytest.mark.slow]


@dataclass
class PipelineCluster(Cluster):
    """The cluster with what the pipeline tests hand on to the next: the landing folder, notes
    for the report, the per mart digests taken right after the first build (before plan/apply
    changes the marts)."""

    notes: list[str] = field(default_factory=list)
    landing: Path | None = None
    digest_query: str | None = None
    digests_before_apply: dict[str, dict] = field(default_factory=dict)


def _alive(pid: int) -> bool:
    """True when `pid` runs (a zombie, already ended and waiting to be reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2 :].split()[0] != "Z"


def _cluster_processes(store: Path) -> list[str]:
    """Live JVMs started for this store: the ones whose command line or working dir is in it."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "stat").read_text()
            if status[status.rindex(")") + 2 :].split()[0] == "Z":
                continue
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(store) in cmdline or cwd.startswith(str(store)):
            found.append(f"{entry.name}: {cmdline[:160]}")
    return found


def _quick_env(store: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "POISONWATCH_HOME": str(store),
            "POISONWATCH_THRIFT_HOST": "127.0.0.1",
            "POISONWATCH_THRIFT_PORT": str(free_port()),
            "POISONWATCH_MASTER_PORT": str(free_port()),
            "POISONWATCH_MASTER_UI_PORT": str(free_port()),
        }
    )
    return env


def test_status_and_stop_without_a_cluster(tmp_path: Path) -> None:
    env = _quick_env(tmp_path / "store")
    status = poisonwatch(env, "cluster", "status")
    assert status.returncode == 3
    assert "no cluster running" in status.stdout
    stop = poisonwatch(env, "cluster", "stop")
    assert stop.returncode == 0
    assert "nothing was running" in stop.stderr


def test_start_refuses_a_busy_port_and_starts_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    env = _quick_env(store)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", int(env["POISONWATCH_THRIFT_PORT"])))
        busy.listen()
        proc = poisonwatch(env, "cluster", "start")
    assert proc.returncode == 2
    assert f"Thrift port {env['POISONWATCH_THRIFT_PORT']}" in proc.stderr
    assert "already in use" in proc.stderr
    assert not (store / "cluster" / "state.json").exists()
    assert not _cluster_processes(store)


def test_start_refuses_a_remote_thrift_host(tmp_path: Path) -> None:
    env = _quick_env(tmp_path / "store")
    env["POISONWATCH_THRIFT_HOST"] = "spark-thrift.example.com"
    proc = poisonwatch(env, "cluster", "start")
    assert proc.returncode == 2
    assert "runs a local cluster on 127.0.0.1 only" in proc.stderr


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PipelineCluster]:
    store = tmp_path_factory.mktemp("cluster") / "store"
    c: PipelineCluster | None = None
    try:
        with running_cluster(store, workers=2, kind=PipelineCluster) as c:
            yield c
    finally:
        if c is not None:
            lines = [f"{k:<34} {v:>7.1f} s" for k, v in c.timings.items()]
            print("\n".join(["", "cluster step times:", *lines, *c.notes]))
            with contextlib.suppress(OSError):
                (store / "cluster-timings.json").write_text(
                    json.dumps({"timings": c.timings, "notes": c.notes}, indent=2)
                )


def test_start_status_and_second_start_refused(cluster: PipelineCluster) -> None:
    state = cluster.state
    names = [p["name"] for p in state["processes"]]
    assert names == ["master", "worker-1", "worker-2", "thrift"]
    assert state["jdbc_url"] == f"jdbc:hive2://127.0.0.1:{cluster.thrift_port}"
    status = cluster.pw("cluster", "status")
    assert "running" in status.stdout
    assert "workers alive: 2/2" in status.stdout
    assert str(cluster.thrift_port) in status.stdout
    # Every listening socket of the cluster is on loopback.
    for p in state["processes"]:
        out = subprocess.run(
            ["ss", "-ltnpH"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        mine = [line for line in out if f"pid={p['pid']}," in line]
        assert mine, f"{p['name']} listens on nothing"
        for line in mine:
            local = line.split()[3]
            assert "127.0.0.1" in local, f"{p['name']} listens on {local}"
    again = poisonwatch(cluster.env, "cluster", "start")
    assert again.returncode == 2
    assert "already running" in again.stderr


def test_sql_dbt_debug_and_beeline_reach_the_thrift_server(cluster: PipelineCluster) -> None:
    rows = cluster.sql_rows("select 1 + 1 as two, current_database() as db")
    assert rows == [{"two": 2, "db": "default"}]
    debug = cluster.dbt("debug", step="dbt debug")
    plain = re.sub(r"\x1b\[[0-9;]*m", "", debug.stdout)
    assert "Connection test: [OK connection ok]" in plain
    out = cluster.beeline("show databases", step="beeline show databases")
    assert "namespace" in out.stdout and "default" in out.stdout


def test_generate_ingest_build_and_labels_on_cluster(cluster: PipelineCluster) -> None:
    landing = cluster.store.parent / "landing"
    cluster.pw(
        "generate",
        "--out",
        str(landing),
        "--seed",
        str(SEED),
        "--attempts",
        str(ATTEMPTS),
        step=f"generate ({ATTEMPTS} attempts)",
    )
    cluster.landing = landing
    cluster.pw("--target", "cluster", "ingest", "--strict", str(landing), step="ingest (cluster)")
    # The landing files were read by the cluster: the raw tables live in its warehouse.
    assert any((cluster.store / "cluster" / "warehouse").glob("raw.db/*"))
    assert not (cluster.store / "metastore_db").exists(), "the runner opened a local metastore"
    cluster.dbt("build", step="dbt build (cluster)")
    # The cluster's tables are Delta tables (Delta's jars reach its driver and executors).
    described = cluster.sql_rows(
        "describe table extended poisonwatch_intermediate.int_receive_attempts_sequenced"
    )
    provider = [row for row in described if "Provider" in row.values()]
    assert len(provider) == 1 and "delta" in provider[0].values(), provider
    verify = cluster.pw("--target", "cluster", "verify", str(landing / "labels.jsonl"))
    assert verify.stdout.count("100.00 %") >= 4, verify.stdout
    # Kept for test_same_marts_as_the_embedded_default: the embedded default is compared with
    # the marts as built from the landing files alone (plan/apply below changes them).
    start = time.monotonic()
    cluster.digest_query = _digest_query(cluster)
    cluster.digests_before_apply = {r["mart"]: r for r in cluster.sql_rows(cluster.digest_query)}
    cluster.timings["mart digests (cluster)"] = round(time.monotonic() - start, 1)


APPLICABLE = (
    "select action_id from poisonwatch.remediation_actions "
    "where status = 'pending' and not requires_review and statement is not null"
)


def test_plan_and_apply_on_cluster(cluster: PipelineCluster) -> None:
    if cluster.landing is None:
        pytest.fail("the end-to-end test above did not leave its landing folder and marts")
    pending = {r["action_id"] for r in cluster.sql_rows(APPLICABLE)}
    assert pending, "the workload should leave something to remediate"
    script = cluster.store.parent / "plan.sql"
    cluster.pw("--target", "cluster", "plan", "--sql", str(script), step="plan (cluster)")
    # One script per server: plan.<server slug>-<hash>.sql.
    scripts = list(script.parent.glob("plan.*.sql"))
    assert scripts and all(p.stat().st_size > 0 for p in scripts)
    cluster.pw("--target", "cluster", "apply", "--yes", step="apply (cluster)")
    ledger = cluster.sql_rows("select action_id from poisonwatch_ops.action_log")
    assert sorted(r["action_id"] for r in ledger) == sorted(pending)
    cluster.dbt("build", step="dbt build after apply (cluster)")
    applied = cluster.sql_rows(
        "select action_id, status, statement_language from poisonwatch.remediation_actions "
        f"where action_id in ({', '.join(repr(a) for a in sorted(pending))})"
    )
    assert {r["action_id"] for r in applied} == pending
    # T-SQL is only written to a DBA's script: awaiting until a later snapshot shows it done.
    for r in applied:
        tsql = r["statement_language"] == "tsql"
        assert r["status"] == ("awaiting_confirmation" if tsql else "applied"), r
    # Apply again: whatever is pending now is applied once, nothing is applied twice.
    cluster.pw("--target", "cluster", "apply", "--yes", step="second apply (cluster)")
    counts = cluster.sql_rows(
        "select count(*) as n, count(distinct action_id) as d from poisonwatch_ops.action_log"
    )[0]
    assert counts["n"] == counts["d"] >= len(pending)


def test_analyst_queries_a_mart_through_beeline(cluster: PipelineCluster) -> None:
    if cluster.landing is None:
        pytest.fail("the end-to-end test above did not build the marts")
    query = (
        "select classification, count(*) as messages from poisonwatch.poison_messages "
        "group by classification order by classification"
    )
    out = cluster.beeline(query, step="beeline query of poison_messages")
    # Beeline 2.3 prints its prompt in front of the first line even with --silent=true.
    lines = [
        re.sub(r"^(\d+: jdbc:hive2://\S*|[. ]+)> ", "", line)
        for line in out.stdout.splitlines()
        if line.strip()
    ]
    over_jdbc = list(csv.DictReader(io.StringIO("\n".join(lines))))
    over_pyhive = cluster.sql_rows(query)
    assert over_jdbc, out.stdout
    assert [(r["classification"], int(r["messages"])) for r in over_jdbc] == [
        (r["classification"], int(r["messages"])) for r in over_pyhive
    ]
    assert {r["classification"] for r in over_jdbc} >= {"poison"}


def _digest_query(c: PipelineCluster) -> str:
    """One query: per mart, its row count and an order-independent hash of each column.

    Columns come from the cluster's catalog; doubles are rounded to 9 digits so a sum computed
    over different partitionings does not count as a difference.
    """
    selects = []
    for mart in MARTS:
        described = c.sql_rows(f"describe poisonwatch.{mart}")
        columns: list[tuple[str, str]] = []
        for r in described:
            name = r["col_name"]
            if not name or name.startswith("#"):
                break
            columns.append((name, r["data_type"]))
        hashes = ", ".join(
            f"'{name}', cast(sum(xxhash64("
            + (f"round(`{name}`, 9)" if dtype in ("double", "float") else f"`{name}`")
            + ")) as string)"
            for name, dtype in columns
        )
        selects.append(
            f"select '{mart}' as mart, count(*) as row_count, "
            f"to_json(map({hashes})) as column_hashes from poisonwatch.{mart}"
        )
    return " union all ".join(selects) + " order by mart"


def test_same_marts_as_the_embedded_default(cluster: PipelineCluster) -> None:
    """The issue's bar: the unchanged repository gives the same marts on both engines."""
    if cluster.landing is None or cluster.digest_query is None:
        pytest.fail("the end-to-end test above did not leave its landing folder and marts")
    local_env = dict(cluster.env)
    local_env.update(
        {
            "POISONWATCH_TARGET": "local",
            "POISONWATCH_HOME": str(cluster.store.parent / "local-store"),
            "POISONWATCH_DRIVER_MEMORY": "2g",
            "DBT_TARGET_PATH": str(cluster.store.parent / "local-store" / "dbt_target"),
            "DBT_LOG_PATH": str(cluster.store.parent / "local-store" / "logs" / "dbt"),
        }
    )
    pw = str(BIN / "poisonwatch")
    cluster.run(
        [pw, "ingest", "--strict", str(cluster.landing)], step="ingest (local)", env=local_env
    )
    cluster.run(
        [str(BIN / "dbt"), "build", "--profiles-dir", str(ROOT), "--project-dir", str(ROOT)],
        step="dbt build (local)",
        env=local_env,
    )
    on_cluster = cluster.digests_before_apply
    proc = cluster.run(
        [pw, "sql", "--format", "json", cluster.digest_query],
        step="mart digests (local)",
        env=local_env,
    )
    on_local = {r["mart"]: r for r in map(json.loads, proc.stdout.splitlines()) if r}
    assert set(on_cluster) == set(on_local) == set(MARTS)
    differing = {}
    for mart in MARTS:
        a, b = on_local[mart], on_cluster[mart]
        if a != b:
            ha, hb = json.loads(a["column_hashes"]), json.loads(b["column_hashes"])
            differing[mart] = {
                "rows (local, cluster)": (a["row_count"], b["row_count"]),
                "columns": sorted(k for k in ha.keys() | hb.keys() if ha.get(k) != hb.get(k)),
            }
    assert not differing, f"marts differ between the embedded default and the cluster: {differing}"
    cluster.notes.append(
        "same marts on local and cluster: "
        + ", ".join(f"{m} ({on_cluster[m]['row_count']} rows)" for m in MARTS)
    )


def test_stop_leaves_no_process(cluster: PipelineCluster) -> None:
    pids = [p["pid"] for p in cluster.state["processes"]]
    assert _cluster_processes(cluster.store), "the cluster should be running before stop"
    cluster.pw("cluster", "stop", step="cluster stop")
    cluster.stopped = True
    left = _cluster_processes(cluster.store)
    assert not left, f"processes left after stop: {left}"
    for pid in pids:
        assert not _alive(pid), f"pid {pid} still alive after stop"
    status = poisonwatch(cluster.env, "cluster", "status")
    assert status.returncode == 3
    assert "no cluster running" in status.stdout
