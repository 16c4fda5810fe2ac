"""`poisonwatch serve` for real: one server on 127.0.0.1 (a free port), a store and a landing
folder of its own, a webhook receiver of the test's own (a local HTTP server).

Round 1: the alert scenarios land; the server ingests and builds them. Its marts agree with the
generator's labels (`poisonwatch verify`, run with no Java reachable: it can only have asked the
server), every incident not yet resolved reached the webhook once as opened, naming its owner
(seed alert_owners), except the muted one; once unmuted, that one is posted too; the report was
written, and commands that need the store to themselves are refused, naming the server.
Round 2: the follow-up lands; while the server builds it a reader queries the mart over Thrift,
and the server is killed with SIGKILL mid-build. A restart carries on: the webhook gets each
resolved incident once and nothing twice, every answer the reader got is the mart at one of its
Delta versions, and the marts equal a full refresh of the same raw data (`dbt run --target
serve`). Beeline, a JDBC client, reads the server; `serve --stop` ends it. The server builds
models only (`--no-data-tests`): the data tests run in every other build of the suite.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.alert_steps import RESOLVED, subject
from support.webhook import Receiver, receiving

from poisonwatch.config import MARTS
from poisonwatch.generate import generate
from poisonwatch.generate.scenarios import INVENTORY_QUEUE
from poisonwatch.warehouse.engine import ThriftEngine
from poisonwatch.warehouse.server import read_status, running_server

ROOT = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
SEED, ATTEMPTS = 7, 300
READ = "select count(*), sum(hash(queue_name, message_id, classification, reason))"
READ_FROM = "poisonwatch.poison_messages"


@pytest.fixture()
def webhook() -> Iterator[str]:
    with receiving() as url:
        yield url


class _World:
    def __init__(self, tmp: Path, webhook: str) -> None:
        self.tmp = tmp
        self.store = tmp / "home"
        self.landing = tmp / "landing"
        self.report = tmp / "report.html"
        self.webhook = webhook
        self.landing.mkdir()
        self.env = {
            **os.environ,
            "POISONWATCH_HOME": str(self.store),
            "POISONWATCH_TARGET": "local",
            "TMPDIR": str(tmp),
        }
        self.server: subprocess.Popen[str] | None = None
        self.port = 0
        self.logs: list[Path] = []

    def start(self) -> None:
        log = self.tmp / f"serve-{len(self.logs) + 1}.log"
        self.logs.append(log)
        with open(log, "w") as out:
            self.server = subprocess.Popen(
                [str(VENV_BIN / "poisonwatch"), "serve", "--port", "0",
                 "--landing", str(self.landing), "--every", "1s", "--webhook", self.webhook,
                 "--report", str(self.report), "--no-data-tests"],
                env=self.env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True,
                start_new_session=True,
            )  # fmt: skip
        # The server binds port 0 (the kernel's choice, no race) and tells the port in its status.
        pid = self.server.pid
        self.port = int(self.wait(lambda s: s is not None and s["pid"] == pid, "the start")["port"])

    def log_tail(self) -> str:
        return "".join(p.read_text()[-3000:] for p in self.logs)

    def wait(self, ready: Any, what: str, timeout: float = 1200) -> dict[str, Any]:
        """Poll the server's status until `ready(status)`; the status of a live server only."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.server is not None and self.server.poll() is None, (
                f"the server exited waiting for {what}:\n{self.log_tail()}"
            )
            server = running_server(self.store)
            status = server.status if server is not None else None
            if ready(status):
                return status or {}
            # The status shows one cycle: a build's stays there only until the next cycle
            # starts, `--every` later, so poll well within that.
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {what}:\n{self.log_tail()}")

    def land(self, source: Path, prefix: str) -> int:
        """Move a generated landing's dataset files in (renamed: each round's names repeat);
        returns the newest file's modification time."""
        newest = 0
        for path in sorted(source.rglob("*")):
            if path.is_file() and path.parent != source:
                target = self.landing / path.parent.name / f"{prefix}-{path.name}"
                target.parent.mkdir(exist_ok=True)
                shutil.copy2(path, target)
                os.utime(target)
                newest = max(newest, target.stat().st_mtime_ns)
        return newest

    def settled_after(self, newest: int, what: str) -> dict[str, Any]:
        return self.wait(
            lambda s: (
                s is not None
                and s.get("step") == "waiting"
                and int((s.get("last_cycle") or {}).get("landing_newest_mtime_ns") or 0) >= newest
            ),
            what,
        )

    def cli(self, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(VENV_BIN / "poisonwatch"), *args], env=env or self.env, cwd=self.tmp,
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip

    def engine(self) -> ThriftEngine:
        return ThriftEngine("local", {"host": "127.0.0.1", "port": self.port})


def _incidents(world: _World) -> list[dict[str, Any]]:
    done = world.cli("alerts", "--incidents", "--format", "json", "--include-resolved")
    assert done.returncode in (0, 1, 2), done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def _posts() -> list[tuple[str, str]]:
    return [(body["incident"]["incident_id"], body["event"]) for body in Receiver.received]


def _owner(incident: dict[str, Any]) -> str:
    """The team of seed alert_owners' most specific row for the incident."""
    queue = (incident["broker_kind"], incident["queue_name"])
    return "expenses" if queue == ("service_broker", "ExpenseQueue") else "operations"


# Muted before round 1 and unmuted after it: the queue the generator disables.
MUTED = ("queue_disabled", INVENTORY_QUEUE)


def _reader(world: _World, seen: list[tuple[Any, ...]], stop: threading.Event) -> None:
    """Query the mart over Thrift until told to stop or the server goes away."""
    with contextlib.suppress(Exception):
        engine = world.engine()
        while not stop.is_set():
            seen.append(tuple(engine.query(f"{READ} from {READ_FROM}")[1][0]))
            time.sleep(0.3)


@pytest.mark.slow
def test_serve_rounds_webhook_kill_and_restart(tmp_path: Path, webhook: str) -> None:
    world = _World(tmp_path, webhook)
    generate(tmp_path / "round-1", seed=SEED, attempts=ATTEMPTS, alert_scenarios=["all"])
    generate(
        tmp_path / "round-2", seed=SEED, attempts=ATTEMPTS, alert_scenarios=["all"],
        follow_up=True,
    )  # fmt: skip
    muting = world.cli("alerts", "mute", *MUTED, "--for", "2h", "--reason", "known: seed 000")
    assert muting.returncode == 0, muting.stderr
    world.start()
    try:
        # --- round 1 -----------------------------------------------------------------------
        status = world.settled_after(world.land(tmp_path / "round-1", "r1"), "round 1")
        last = status["last_cycle"]
        assert "build" in last["line"] and last["build_seconds"] > 0, status
        assert last["files"] > 0 and not last["is_idle"], status  # the line's figures, as data
        no_java = {**world.env, "PATH": str(VENV_BIN), "JAVA_HOME": str(tmp_path / "no-java")}
        verify = world.cli("verify", str(tmp_path / "round-1" / "labels.jsonl"), env=no_java)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        incidents = {i["incident_id"]: i for i in _incidents(world)}
        live = {k for k, i in incidents.items() if i["status"] in ("open", "quiet")}
        muted = {k for k, i in incidents.items() if i["muted"] is not None}
        assert [(incidents[k]["alert_kind"], incidents[k]["subject"]) for k in muted] == [MUTED]
        assert incidents[next(iter(muted))]["muted"]["reason"] == "known: seed 000"
        assert live - muted and sorted(_posts()) == sorted((k, "opened") for k in live - muted)
        for body in Receiver.received:
            assert body["owner"]["team"] == _owner(body["incident"]), body["owner"]
        assert all(i["owner_team"] == _owner(i) for i in incidents.values())
        # Unmuted, the server posts the incident at its next cycle, with no new data.
        assert world.cli("alerts", "unmute", *MUTED).returncode == 0
        deadline = time.monotonic() + 120
        while not muted <= {k for k, _ in _posts()} and time.monotonic() < deadline:
            time.sleep(0.5)
        assert sorted(_posts()) == sorted((k, "opened") for k in live), world.log_tail()
        opened = live
        assert world.report.is_file() and "<section" in world.report.read_text()
        state = world.cli("serve", "--status", "--format", "json")
        assert state.returncode == 0 and json.loads(state.stdout)["lag_seconds"] == 0
        for refused in (["store", "rebuild", "--no-build"], ["serve", "--port", "0"], ["check"]):
            done = world.cli(*refused)
            assert done.returncode == 2 and "poisonwatch serve" in done.stderr, done.stderr
        assert not list(world.store.glob("*.orphan-*"))

        # --- round 2, killed mid-build -----------------------------------------------------
        newest = world.land(tmp_path / "round-2", "r2")
        seen: list[tuple[Any, ...]] = []
        stop = threading.Event()
        reader = threading.Thread(target=_reader, args=(world, seen, stop), daemon=True)
        reader.start()
        world.wait(lambda s: s is not None and s.get("step") == "build", "the round-2 build")
        time.sleep(5)
        assert world.server is not None
        os.killpg(world.server.pid, signal.SIGKILL)
        world.server.wait(timeout=60)
        stop.set()
        reader.join(timeout=60)
        assert running_server(world.store) is None and read_status(world.store) is not None
        assert world.cli("serve", "--status").returncode == 3

        # --- the restart carries on --------------------------------------------------------
        world.start()
        world.settled_after(newest, "round 2 after the restart")
        after = {i["incident_id"]: i for i in _incidents(world)}
        posts = _posts()
        assert len(posts) == len(set(posts)), f"posted twice: {posts}"
        still_open = {k for k, i in after.items() if i["status"] in ("open", "quiet")}
        assert {k for k, e in posts if e == "opened"} == opened | still_open
        resolved = {k for k, e in posts if e == "resolved"}
        want = {k for k, i in after.items() if i["status"] == "resolved" and k in opened}
        assert resolved == want, (resolved, want)
        resolved_subjects = {(after[k]["alert_kind"], subject(after[k])) for k in resolved}
        assert resolved_subjects >= RESOLVED, resolved_subjects
        for k in resolved:  # the lifecycle `alerts --incidents` shows: the posts made
            assert [p["event"] for p in after[k]["posts"]] == ["opened", "resolved"]
            assert after[k]["resolved_at"] is not None

        engine = world.engine()
        try:
            versions = engine.query(f"describe history {READ_FROM}")[1]
            answers = {
                tuple(engine.query(f"{READ} from {READ_FROM} version as of {row[0]}")[1][0])
                for row in versions
            }
            assert seen and set(seen) <= answers, (set(seen) - answers, len(seen))
            engine.execute("create database if not exists compare")
            for mart in MARTS:
                engine.execute(f"drop table if exists compare.{mart}")
                engine.execute(f"create table compare.{mart} as select * from poisonwatch.{mart}")
        finally:
            engine.close()
        # The reference: every model rebuilt from the raw data, by dbt itself through the
        # server (`--target serve`, as docs/serve.md tells dbt users).
        full = subprocess.run(
            [str(VENV_BIN / "dbt"), "run", "--selector", "production", "--full-refresh",
             "--target", "serve", "--profiles-dir", str(ROOT), "--project-dir", str(ROOT),
             "--target-path", str(tmp_path / "dbt-target"), "--log-path", str(tmp_path)],
            env={**world.env, "POISONWATCH_SERVE_PORT": str(world.port)}, cwd=ROOT,
            capture_output=True, text=True, timeout=1800,
        )  # fmt: skip
        assert full.returncode == 0, full.stdout[-3000:]
        engine = world.engine()
        try:
            for mart in MARTS:
                ours, theirs = f"select * from compare.{mart}", f"select * from poisonwatch.{mart}"
                only_ours = engine.scalar(f"select count(*) from ({ours} except all {theirs})")
                only_full = engine.scalar(f"select count(*) from ({theirs} except all {ours})")
                assert (only_ours, only_full) == (0, 0), mart
                count = engine.scalar(f"select count(*) from poisonwatch.{mart}")
        finally:
            engine.close()

        import pyspark

        beeline = Path(pyspark.__file__ or "").parent / "bin" / "beeline"
        done = subprocess.run(
            [str(beeline), "-u", f"jdbc:hive2://127.0.0.1:{world.port}", "-n", "analyst",
             "--silent=true", "--outputformat=csv2", "-e",
             f"select count(*) as n from poisonwatch.{MARTS[-1]}"],
            env=world.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0 and str(count) in done.stdout.split(), done.stdout
        stopped = world.cli("serve", "--stop")
        assert stopped.returncode == 0, stopped.stderr
        assert world.server is not None and world.server.wait(timeout=120) == 0
        assert read_status(world.store) is None and running_server(world.store) is None
    finally:
        if world.server is not None and world.server.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(world.server.pid, signal.SIGKILL)
