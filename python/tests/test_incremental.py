"""Incremental dbt runs give the same marts as a full refresh, late-arriving attempts included.

One workload is generated, then split: the newest attempt files and two files from the middle
of the history (late arrivals: attempts older than what is already loaded) are held back. The
first part is ingested and built; the held-back files are ingested and the models run
incrementally; the marts are saved; a full refresh rebuilds everything from the same raw data;
the marts must be equal row for row, and must agree 100 % with the generator's labels.
The same label check runs at a second seed (11) in scripts/test.sh, after a full `dbt build`.
Attempts and messages are partitioned by 5-minute buckets here (the project's default is an
hour), so the two-hour workload spans about 25 partitions and the incremental run must leave
most of them as they were. (20-second buckets, about 370 partitions, made the same test take
469 s instead of 328 s with the same CPU time, 236 s: the extra is waiting on writing and
registering 15 times as many partitions.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from poisonwatch.config import MARTS

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
VARS = "{message_partition_seconds: 300, attempt_partition_seconds: 300}"

SNAPSHOT = """
from poisonwatch.engine import connect
with connect() as engine:
    engine.execute("create database if not exists compare")
    for mart in {marts!r}:
        engine.execute(f"drop table if exists compare.{{mart}}")
        engine.execute(f"create table compare.{{mart}} as select * from poisonwatch.{{mart}}")
    runs = engine.scalar(
        "select count(distinct sequenced_at) "
        "from poisonwatch_intermediate.int_receive_attempts_sequenced"
    )
    print(f"RUNS {{runs}}")
"""

COMPARE = """
from poisonwatch.engine import connect
with connect() as engine:
    for mart in {marts!r}:
        total = engine.scalar(f"select count(*) from poisonwatch.{{mart}}")
        only_incremental = engine.scalar(
            f"select count(*) from (select * from compare.{{mart}} "
            f"except all select * from poisonwatch.{{mart}})"
        )
        only_full = engine.scalar(
            f"select count(*) from (select * from poisonwatch.{{mart}} "
            f"except all select * from compare.{{mart}})"
        )
        print(f"MART {{mart}} {{total}} {{only_incremental}} {{only_full}}")
"""


def _run(args: list[str], env: dict[str, str]) -> str:
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(args)} exited {proc.returncode}\n--- stdout\n{proc.stdout[-6000:]}"
            f"\n--- stderr\n{proc.stderr[-6000:]}"
        )
    return proc.stdout


def _dbt(command: list[str], env: dict[str, str]) -> str:
    args = [str(BIN / "dbt"), *command, "--profiles-dir", str(ROOT), "--project-dir", str(ROOT)]
    return _run([*args, "--vars", VARS], env)


def _hold_back(landing: Path, delta: Path) -> int:
    """Move the newest attempt files and two from the middle into `delta`; returns files moved."""
    moved = 0
    for dataset, middle in (("ssb_receive_attempts", True), ("jms_receive_attempts", True)):
        files = sorted((landing / dataset).iterdir())
        assert len(files) >= 6, f"{dataset}: too few files to split ({len(files)})"
        chosen = [files[-1]] + ([files[len(files) // 2]] if middle else [])
        (delta / dataset).mkdir(parents=True, exist_ok=True)
        for f in chosen:
            shutil.move(f, delta / dataset / f.name)
            moved += 1
    return moved


@pytest.mark.slow
def test_incremental_equals_full_refresh(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["POISONWATCH_HOME"] = str(tmp_path / "store")
    env["POISONWATCH_TARGET"] = "local"
    # dbt writes its manifest and logs beside this store, not in the project: runs in
    # parallel (pytest workers, the test script's own build) never share a target folder.
    env["DBT_TARGET_PATH"] = str(tmp_path / "dbt_target")
    env["DBT_LOG_PATH"] = str(tmp_path / "dbt_logs")
    landing, delta = tmp_path / "landing", tmp_path / "delta"
    pw = str(BIN / "poisonwatch")
    _run(
        [
            pw,
            "generate",
            "--out",
            str(landing),
            "--seed",
            "31",
            "--attempts",
            "6000",
            "--chunk-records",
            "300",
        ],
        env,
    )
    assert _hold_back(landing, delta) == 4
    _run([pw, "ingest", "--strict", str(landing)], env)
    _dbt(["seed"], env)
    _dbt(["run"], env)
    _run([pw, "ingest", "--strict", str(delta)], env)
    _dbt(["run"], env)
    verified = _run([pw, "verify", str(landing / "labels.jsonl")], env)
    assert "100.00 %" in verified, verified
    snapshot = _run([sys.executable, "-c", SNAPSHOT.format(marts=list(MARTS))], env)
    # Partitions the held-back files did not touch kept the first run's rows.
    runs = [int(line.split()[1]) for line in snapshot.splitlines() if line.startswith("RUNS ")]
    assert runs == [2], snapshot
    _dbt(["run", "--full-refresh"], env)
    out = _run([sys.executable, "-c", COMPARE.format(marts=list(MARTS))], env)
    rows = {
        parts[1]: tuple(int(v) for v in parts[2:])
        for parts in (line.split() for line in out.splitlines())
        if parts and parts[0] == "MART"
    }
    assert set(rows) == set(MARTS), out
    for mart, (total, only_incremental, only_full) in rows.items():
        assert total > 0, f"{mart} is empty"
        assert (only_incremental, only_full) == (0, 0), (
            f"{mart}: {only_incremental} row(s) only in the incremental build, "
            f"{only_full} only in the full refresh"
        )
