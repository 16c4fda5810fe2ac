"""What `poisonwatch cluster start` exposes, and the apply lease between machines, on one real
cluster (a master, one worker and its executor, a Thrift server; about a minute to start):

- the shared secret (`spark.authenticate`) is new, private (0600, in no command line or log) and
  a client without it is refused by the master, while the cluster's own processes use it;
- every socket that any process of the cluster listens on is on 127.0.0.1;
- the apply lease is ordered by the store, not by clients' clocks: applies in other processes
  whose clocks are an hour behind or three hours ahead are refused while an apply holds it; a
  long apply renews it past its period; a holder that stops renewing is taken over after the
  period by the store's clock, and then refuses to commit (its fencing token is no longer the
  newest).
- end to end through the Thrift target on the same cluster: the JMS half of a small generated
  landing ingested with `--target cluster`, `dbt build --target cluster` of poison_messages and
  what it is built from, and the mart read back over JDBC by beeline and through PyHive, both
  agreeing with the generator's labels message by message.

Not marked `cluster`: `make test` runs it (the whole pipeline on a cluster, every mart compared
with the embedded default, is test_cluster.py, marked `cluster`). Ports are picked free, so a
cluster already running is untouched.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cluster import ROOT, Cluster, running_cluster

pytestmark = pytest.mark.slow

# The lease period of these tests: long enough for a renewal on a busy two-core machine (one
# statement on the Thrift server took up to ten seconds beside other Spark tests).
LEASE_SECONDS = 30


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with running_cluster(tmp_path_factory.mktemp("secured") / "store", workers=1) as c:
        yield c


def _cluster_pids(c: Cluster) -> dict[int, str]:
    """Every live process of the cluster (executors too), by the manager's own accounting."""
    from poisonwatch.cluster.manager import Layout, State, leftover_pids

    layout = Layout(c.store / "cluster")
    state = State.load(layout.state_file)
    names = {p.pid: p.name for p in state.processes} if state else {}
    return {pid: names.get(pid, "executor") for pid in leftover_pids(layout, state)}


def _secret(c: Cluster) -> str:
    conf = (c.store / "cluster" / "conf" / "spark-defaults.conf").read_text()
    match = re.search(r"^spark\.authenticate\.secret (\S+)$", conf, re.M)
    assert match, "no shared secret in spark-defaults.conf"
    return match.group(1)


def test_the_shared_secret_is_new_and_private(cluster: Cluster) -> None:
    conf_dir = cluster.store / "cluster" / "conf"
    conf = conf_dir / "spark-defaults.conf"
    assert conf.stat().st_mode & 0o777 == 0o600
    assert conf_dir.stat().st_mode & 0o777 == 0o700
    assert re.search(r"^spark\.authenticate true$", conf.read_text(), re.M)
    secret = _secret(cluster)
    assert re.fullmatch(r"[0-9a-f]{64}", secret)
    pids = _cluster_pids(cluster)
    assert "executor" in pids.values(), "the Thrift server's executor should run"
    for pid, name in pids.items():
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert secret not in cmdline, f"the secret is on the command line of {name}"
    assert secret not in (cluster.store / "cluster" / "state.json").read_text()
    for log in (cluster.store / "cluster").rglob("*.log"):
        assert secret not in log.read_text(errors="replace"), f"the secret is in {log}"


def test_a_client_without_the_secret_is_refused_by_the_master(
    cluster: Cluster, tmp_path: Path
) -> None:
    spark_home = Path(cluster.env["SPARK_HOME_FOR_TEST"])
    empty_conf = tmp_path / "conf"
    empty_conf.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_"))}
    env.update(
        {
            "SPARK_HOME": str(spark_home),
            "SPARK_CONF_DIR": str(empty_conf),
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    # Spark's own standalone client asks the master to kill a driver: an RPC the master answers
    # to anyone who passes its authentication.
    client = subprocess.run(
        [
            str(spark_home / "bin" / "spark-class"),
            "org.apache.spark.deploy.Client",
            "kill",
            cluster.state["master_url"],
            "driver-20260101000000-0000",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = client.stdout + client.stderr
    assert client.returncode != 0, out[-3000:]
    assert "Expected SaslMessage" in out, out[-3000:]
    # The cluster's own processes hold the secret: the Thrift server runs as an application
    # with its executor's cores.
    master_ui = cluster.state["master_ui"]
    with urllib.request.urlopen(f"{master_ui}/json/", timeout=10) as response:
        info = json.loads(response.read().decode())
    apps = [(a["name"], a["state"]) for a in info["activeapps"]]
    assert apps == [("poisonwatch-thrift", "RUNNING")], apps
    assert info["coresused"] >= 1


def test_every_listening_socket_is_on_loopback(cluster: Cluster) -> None:
    pids = _cluster_pids(cluster)
    lines = subprocess.run(
        ["ss", "-ltnpH"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    listening: dict[str, list[str]] = {}
    for line in lines:
        for pid in map(int, re.findall(r"pid=(\d+),", line)):
            if pid in pids:
                listening.setdefault(pids[pid], []).append(line.split()[3])
    assert set(listening) >= {"master", "worker-1", "thrift", "executor"}, listening
    for name, addresses in listening.items():
        for address in addresses:
            host = address.rsplit(":", 1)[0]
            assert host in ("127.0.0.1", "[::ffff:127.0.0.1]"), f"{name} listens on {address}"
    # The Thrift server: JDBC, its application UI, its driver's RPC and block manager.
    assert len(listening["thrift"]) >= 4, listening["thrift"]


def test_the_executor_and_the_thrift_driver_run_with_the_callers_jvm_options(
    cluster: Cluster,
) -> None:
    """`cluster start` copied the caller's spark-defaults.conf (here the suite's, from
    SPARK_CONF_DIR) into the cluster's: its executor and its Thrift driver run with the JVM
    options it names, read from their command lines."""
    caller = Path(cluster.env.get("SPARK_CONF_DIR", "")) / "spark-defaults.conf"
    wanted: dict[str, list[str]] = {}
    if caller.is_file():
        for line in caller.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key in ("spark.executor.defaultJavaOptions", "spark.driver.defaultJavaOptions"):
                wanted["executor" if "executor" in key else "thrift"] = value.split()
    if os.environ.get("CI") == "true":  # the suite's folder names both
        assert set(wanted) == {"executor", "thrift"}, caller
    pids = _cluster_pids(cluster)
    for name, options in wanted.items():
        found = [pid for pid, what in pids.items() if what == name]
        assert found, (name, pids)
        for pid in found:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            words = [a.decode(errors="replace") for a in args]
            missing = [o for o in options if o not in words]
            assert not missing, (name, missing, words[:40])


# One apply's view of the lease, in a process of its own: take it, hold it (sleeping, like a
# long Spark statement, while the lease's own thread renews it) until a file appears or some
# seconds pass, check it before "committing", release it. Prints its outcome as JSON lines.
LEASE_SCRIPT = """
import json, os, sys, time
from pathlib import Path
from poisonwatch.remediation.ledger import ApplyBusyError, ApplyLock, ensure_ops_tables
from poisonwatch.warehouse.engine import connect

def say(**what):
    print("@@" + json.dumps(what), flush=True)

hold, until = float(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else None
with connect("cluster") as engine:
    ensure_ops_tables(engine)
    lock = ApplyLock()
    try:
        lock.acquire_lease(engine, "cluster")
    except ApplyBusyError as exc:
        say(outcome="busy", why=str(exc))
        sys.exit(0)
    say(outcome="acquired", token=lock.token)
    end = time.monotonic() + hold
    while time.monotonic() < end and not (until and until.exists()):
        time.sleep(0.2)
    try:
        lock.check_lease()
    except Exception as exc:
        say(outcome="lost", why=str(exc))
        sys.exit(3)
    lock.release_lease()
    say(outcome="released")
"""


def _lease_env(c: Cluster, home: Path, offset: int = 0) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    env = dict(c.env)
    # A home of its own: another machine's apply, with no file lock shared with this one.
    env.update(
        {"POISONWATCH_HOME": str(home), "POISONWATCH_APPLY_LEASE_SECONDS": str(LEASE_SECONDS)}
    )
    if offset:
        env["POISONWATCH_TEST_CLOCK_OFFSET_SECONDS"] = str(offset)
    return env


def _outcomes(text: str) -> list[dict]:
    return [json.loads(line[2:]) for line in text.splitlines() if line.startswith("@@")]


def _attempt(c: Cluster, home: Path, offset: int = 0) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", LEASE_SCRIPT, "0"],
        env=_lease_env(c, home, offset),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    found = _outcomes(proc.stdout)
    assert proc.returncode == 0 and found, proc.stdout + proc.stderr[-3000:]
    return found[0]


class _Holder:
    """An apply holding the lease in the background, its output in a file."""

    def __init__(self, c: Cluster, home: Path, hold: float, until: Path | None = None) -> None:
        self.out = home.parent / f"{home.name}.out"
        self.handle = self.out.open("w")
        args = [sys.executable, "-c", LEASE_SCRIPT, str(hold)] + ([str(until)] if until else [])
        self.proc = subprocess.Popen(
            args, env=_lease_env(c, home), cwd=ROOT, stdout=self.handle, stderr=subprocess.STDOUT
        )

    def outcomes(self) -> list[dict]:
        return _outcomes(self.out.read_text())

    def wait_for(self, outcome: str, timeout: float = 600) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [o for o in self.outcomes() if o["outcome"] == outcome]
            if found:
                return found[0]
            if self.proc.poll() is not None and not found:
                break
            time.sleep(0.5)
        raise AssertionError(f"no {outcome!r}: {self.out.read_text()[-3000:]}")

    def close(self) -> int:
        try:
            return self.proc.wait(timeout=600)
        finally:
            self.handle.close()


def test_the_apply_lease_is_ordered_by_the_store_not_by_clients_clocks(
    cluster: Cluster, tmp_path: Path
) -> None:
    done = tmp_path / "done"
    holder = _Holder(cluster, tmp_path / "a", hold=20 * LEASE_SECONDS, until=done)
    try:
        token = holder.wait_for("acquired")["token"]
        acquired_at = time.monotonic()
        # Two other machines whose clocks are an hour behind and three hours ahead.
        behind = _attempt(cluster, tmp_path / "behind", offset=-3600)
        ahead = _attempt(cluster, tmp_path / "ahead", offset=3 * 3600)
        assert behind["outcome"] == "busy", behind
        assert ahead["outcome"] == "busy", ahead
        # Past the lease period the holder, still busy with its long apply, has renewed it.
        time.sleep(max(acquired_at + LEASE_SECONDS + 10 - time.monotonic(), 0))
        later = _attempt(cluster, tmp_path / "later")
        assert later["outcome"] == "busy", later
        assert "pid" in later["why"], later
        done.touch()
        assert holder.wait_for("released")
        assert holder.close() == 0
    finally:
        if holder.proc.poll() is None:
            holder.proc.kill()
            holder.close()
    # Released: the next apply takes the next token, whatever its clock says.
    after = _attempt(cluster, tmp_path / "behind", offset=-3600)
    assert after == {"outcome": "acquired", "token": token + 1}


def test_an_unrenewed_lease_is_taken_over_and_its_holder_cannot_commit(
    cluster: Cluster, tmp_path: Path
) -> None:
    go_on = tmp_path / "go-on"
    stalled = _Holder(cluster, tmp_path / "stalled", hold=20 * LEASE_SECONDS, until=go_on)
    try:
        token = stalled.wait_for("acquired")["token"]
        # Frozen (like a machine that lost the network): neither it nor its renewer runs.
        os.kill(stalled.proc.pid, signal.SIGSTOP)
        time.sleep(LEASE_SECONDS + 15)
        taken = _attempt(cluster, tmp_path / "successor")
        assert taken == {"outcome": "acquired", "token": token + 1}, taken
        go_on.touch()
        os.kill(stalled.proc.pid, signal.SIGCONT)
        lost = stalled.wait_for("lost")
        assert "lost its lease" in lost["why"] and f"token {token}" in lost["why"], lost
        assert stalled.close() == 3
    finally:
        if stalled.proc.poll() is None:
            os.kill(stalled.proc.pid, signal.SIGCONT)
            stalled.proc.kill()
            stalled.close()


# A small workload with poison, recovered and retrying JMS messages. Its Service Broker half is
# left out: each dataset costs several statements on the Thrift server, and test_cluster.py
# builds both halves on a cluster.
PIPELINE_SEED, PIPELINE_ATTEMPTS = 7, 400


def _message_key(row: dict) -> tuple:
    return (row["broker_name"], row["queue_name"], row["message_id"])


def test_a_mart_built_through_thrift_is_read_back_by_beeline(
    cluster: Cluster, tmp_path: Path
) -> None:
    landing = tmp_path / "landing"
    cluster.pw(
        "generate", "--out", str(landing), "--seed", str(PIPELINE_SEED),
        "--attempts", str(PIPELINE_ATTEMPTS),
    )  # fmt: skip
    for folder in landing.glob("ssb_*"):
        shutil.rmtree(folder)
    cluster.pw("--target", "cluster", "ingest", "--strict", str(landing))
    cluster.dbt(
        "build", "--select", "+poison_messages",
        "--exclude-resource-type", "test", "--exclude-resource-type", "unit_test",
    )  # fmt: skip
    # The tables live in the cluster's warehouse, not in a metastore this process opened.
    assert any((cluster.store / "cluster" / "warehouse").glob("poisonwatch.db/poison_messages"))
    assert not (cluster.store / "metastore_db").exists()
    labels = [
        row
        for row in map(json.loads, (landing / "labels.jsonl").read_text().splitlines())
        if row["kind"] == "message" and row["broker_kind"] == "jms"
    ]
    expected = {_message_key(r): (r["classification"], r["reason"]) for r in labels}
    assert {c for c, _ in expected.values()} >= {"poison", "recovered", "retrying"}
    over_pyhive = cluster.sql_rows(
        "select broker_name, queue_name, message_id, classification, reason "
        "from poisonwatch.poison_messages where broker_kind = 'jms'"
    )
    assert {_message_key(r): (r["classification"], r["reason"]) for r in over_pyhive} == expected
    query = (
        "select broker_kind, classification, count(*) as messages "
        "from poisonwatch.poison_messages group by broker_kind, classification "
        "order by broker_kind, classification"
    )
    out = cluster.beeline(query)
    # Beeline prints its prompt in front of the first line even with --silent=true.
    lines = [
        re.sub(r"^(\d+: jdbc:hive2://\S*|[. ]+)> ", "", line)
        for line in out.stdout.splitlines()
        if line.strip()
    ]
    over_jdbc = {
        (r["broker_kind"], r["classification"]): int(r["messages"])
        for r in csv.DictReader(io.StringIO("\n".join(lines)))
    }
    counted: dict[tuple[str, str], int] = {}
    for r in labels:
        key = (r["broker_kind"], r["classification"])
        counted[key] = counted.get(key, 0) + 1
    assert over_jdbc == counted, out.stdout
