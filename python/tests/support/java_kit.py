"""The Java consumer kit (`java/`) for tests: `build(folder)` runs its Maven build with the JUnit
tests into `folder` and returns the agents' class path; `agent(...)` runs the example agent
(`dev.poisonwatch.kit.example.Agent`) against a real Artemis and returns its summary;
`board(broker)` reads the fuse board the agents report to."""

from __future__ import annotations

import collections
import json
import os
import subprocess
from pathlib import Path
from typing import Any

from poisonwatch.broker.artemis import JolokiaClient
from poisonwatch.broker.profiles import parse_artemis_url
from support.artemis import Artemis

ROOT = Path(__file__).resolve().parents[3]


def build(folder: Path) -> str:
    """`mvn test` of java/ into `folder` (its JUnit tests must pass and be at least 8)."""
    cp_file = folder / "classpath.txt"
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-Dstyle.color=never", "-f", str(ROOT / "java" / "pom.xml"),
         f"-Dpoisonwatch.build={folder}", "test", "dependency:build-classpath",
         "-Dmdep.includeScope=test", f"-Dmdep.outputFile={cp_file}"],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    reports = list((folder / "surefire-reports").glob("TEST-*.xml"))
    ran = sum(int(r.read_text().split('tests="', 1)[1].split('"', 1)[0]) for r in reports)
    # Every @Test method of java/src/test ran: none skipped, none lost to a broken scan.
    declared = sum(
        path.read_text(encoding="utf-8").count("@Test")
        for path in (ROOT / "java" / "src" / "test").rglob("*.java")
    )
    assert ran == declared, f"JUnit ran {ran} tests, java/src/test declares {declared}"
    return os.pathsep.join(
        [str(folder / "classes"), str(folder / "test-classes"), cp_file.read_text().strip()]
    )


def agent(
    broker: Artemis, classpath: str, landing: Path, queue: str, consumer: str, server: str,
    behaviour: str, **opt: Any,
) -> dict[str, Any]:  # fmt: skip
    """Run one agent until it is idle for `idle` seconds (default 3) or its fuse stops it."""
    args = {
        "url": f"tcp://127.0.0.1:{broker.port}",
        "user": broker.user,
        "password": broker.password,
        "landing": str(landing),
        "broker-name": broker.name,
        "queue": queue,
        "consumer-id": consumer,
        "server": server,
        "behaviour": behaviour,
        "idle": "3",
        **{k.replace("_", "-"): str(v) for k, v in opt.items()},
    }
    cmd = ["java", "-cp", classpath, "dev.poisonwatch.kit.example.Agent"]
    for key, value in args.items():
        cmd += [f"--{key}", value]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("@@")]
    return {
        "rc": proc.returncode,
        "stderr": proc.stderr[-3000:],
        **(json.loads(lines[-1][2:]) if lines else {}),
    }


def board(broker: Artemis) -> dict[str, set[str]]:
    """consumer_id -> servers reporting, as the fuse board (`poisonwatch.fuse`) holds them."""
    client = JolokiaClient(parse_artemis_url(broker.url))
    found = [q for q in client.queues() if q.name == "poisonwatch.fuse"]
    out: dict[str, set[str]] = collections.defaultdict(set)
    for m in client.browse(found[0]) if found else []:
        props = m.get("StringProperties") or {}
        out[props.get("consumer_id", "")].add(props.get("server_name", ""))
    return dict(out)
