"""`poisonwatch build` with real dbt and Spark: what an ingest's selectors reach (`dbt ls`), and
`build --ingest` on a tiny workload (what it runs for which change is pure: unit/test_build.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from poisonwatch.warehouse.build import INGEST_SELECTORS, STAMP

# The models tagged on_demand (selectors.yml): the backtests and the models only they read.
ON_DEMAND_MODELS = (
    "policy_backtest",
    "breaker_backtest",
    "error_class_evidence",
    "int_message_failures_accumulated",
    "int_policy_candidates_resolved",
)


def test_every_ingest_reruns_only_the_ledger_staging_models(tmp_path: Path) -> None:
    """Every ingest adds to the ledger, so every partial build selects INGEST_SELECTORS: the
    models they reach run after each ingest, whatever it landed. Only the two staging views may
    be there, although every staging model reads the ledger (committed batches only): a
    dataset's models rerun through its own source. Real `dbt ls`."""
    root = Path(__file__).resolve().parents[3]
    listed = subprocess.run(
        [
            "dbt", "ls", "--select", *INGEST_SELECTORS, "--resource-type", "model",
            "--output", "name", "--quiet", "--project-dir", str(root),
            "--profiles-dir", str(root), "--target", "local",
            "--target-path", str(tmp_path / "target"), "--log-path", str(tmp_path / "logs"),
        ],
        env={**os.environ, "POISONWATCH_HOME": str(tmp_path / "store")},
        capture_output=True, text=True, check=False, cwd=root,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stdout + listed.stderr
    names = sorted(line for line in listed.stdout.split() if line)
    assert names == ["stg_ingest__ingested_files", "stg_ingest__rejects"], names


def _spark_conf_dir_with_java_options(folder: Path, options: str) -> Path:
    """A Spark configuration folder: the caller's ($SPARK_CONF_DIR, e.g. scripts/test.sh's)
    settings, with `options` added to its spark.driver.defaultJavaOptions."""
    lines: list[str] = []
    java_options = [options]
    caller = os.environ.get("SPARK_CONF_DIR")
    defaults = Path(caller) / "spark-defaults.conf" if caller else None
    if defaults is not None and defaults.is_file():
        for line in defaults.read_text().splitlines():
            key, *value = line.split(None, 1) or [""]
            if key == "spark.driver.defaultJavaOptions":
                java_options[:0] = value
            else:
                lines.append(line)
    folder.mkdir(parents=True, exist_ok=True)
    lines.append(f"spark.driver.defaultJavaOptions {' '.join(java_options)}")
    (folder / "spark-defaults.conf").write_text("\n".join(lines) + "\n")
    return folder


@pytest.mark.slow
def test_build_ingest_lands_and_builds_in_one_driver(tmp_path: Path) -> None:
    """`poisonwatch build --ingest LANDING`: the landing is ingested and the production build
    runs in the same driver (the JIT's warm-up and a driver start paid once). Real Spark and
    dbt on a tiny workload; then the same command again finds the files already ingested and
    skips the build. This is the suite's one store in the Parquet fallback
    (POISONWATCH_FILE_FORMAT=parquet, for platforms without Delta): no table is a Delta table,
    and the marts agree with the generator's labels."""
    from poisonwatch.generate import generate

    landing = tmp_path / "landing"
    generate(landing, seed=7, attempts=400)
    # Every driver JVM writes a log file named by its pid: one file is one driver.
    jvm_logs = tmp_path / "jvm-logs"
    jvm_logs.mkdir()
    conf_dir = _spark_conf_dir_with_java_options(
        tmp_path / "spark-conf", f"-Xlog:gc:file={jvm_logs}/jvm-%p.log"
    )
    env = {
        **os.environ,
        "POISONWATCH_HOME": str(tmp_path / "home"),
        "POISONWATCH_TARGET": "local",
        "SPARK_CONF_DIR": str(conf_dir),
        "POISONWATCH_FILE_FORMAT": "parquet",
    }
    cmd = [shutil.which("poisonwatch") or "poisonwatch", "build", "--ingest", str(landing)]

    first = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    out = first.stdout + first.stderr
    assert first.returncode == 0, out[-5000:]
    assert "records loaded" in out and "0 row(s) written to raw.raw_rejects" in out, out[-3000:]
    assert "poisonwatch build: " in out, out[-3000:]
    # Ingest and build ran in one driver.
    assert len(list(jvm_logs.glob("jvm-*.log"))) == 1, sorted(jvm_logs.iterdir())
    state = json.loads((tmp_path / "home" / "production_build.json").read_text())["local"]
    assert state["dbt_args"][:3] == ["build", "--selector", "production"]
    # The stamp its incremental models wrote, which the next build reads after.
    assert STAMP.fullmatch(state["changes_up_to"] or ""), state["changes_up_to"]
    for dataset in ("ssb_receive_attempts", "jms_receive_attempts"):
        files, batch = state["datasets"][dataset]
        assert files > 0 and batch, (dataset, state["datasets"])
    results = json.loads((tmp_path / "home" / "dbt_target" / "run_results.json").read_text())
    statuses = {r["unique_id"]: r["status"] for r in results["results"]}
    assert statuses["model.poisonwatch.poison_messages"] == "success"
    assert not [u for u, s in statuses.items() if s not in ("success", "pass")], statuses
    # The on-demand models, the two backtests and the two models only a backtest reads, are
    # left to `poisonwatch backtest` (selectors.yml).
    on_demand = [u for u in statuses if any(name in u for name in ON_DEMAND_MODELS)]
    assert not on_demand, on_demand

    again = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    out = again.stdout + again.stderr
    assert again.returncode == 0, out[-5000:]
    assert "0 records loaded" in out and "skipped, nothing new" in out, out[-3000:]
    assert len(list(jvm_logs.glob("jvm-*.log"))) == 2  # the rerun's ingest needed one driver

    warehouse = tmp_path / "home" / "warehouse"
    assert any(warehouse.rglob("*.parquet")), sorted(warehouse.iterdir())
    assert not list(warehouse.rglob("_delta_log")), list(warehouse.rglob("_delta_log"))[:5]
    verify = subprocess.run(
        [cmd[0], "verify", str(landing / "labels.jsonl")],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert verify.returncode == 0, (verify.stdout + verify.stderr)[-3000:]
