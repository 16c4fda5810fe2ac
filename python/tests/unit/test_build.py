"""`poisonwatch build`: what it runs for which change of its inputs (no Spark: the plan is pure),
and a build with nothing new that starts no JVM.

`dbt ls` of an ingest's selectors and `build --ingest` for real are in
integration/test_build_spark.py. The real runs — a full production build, a partial one after a
delta, and a skipped one with nothing new — are exercised on a real store by the tiny-size bench
(integration/test_bench_spark.py), whose worker builds through `production_build`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from poisonwatch.cli import main as cli_main
from poisonwatch.config import PoisonwatchError, spark_conf
from poisonwatch.warehouse.build import (
    INGEST_SELECTORS,
    NO_UNIT_TESTS,
    NOT_ON_DEMAND,
    PRODUCTION,
    BuildInputs,
    _batch_bound,
    _bound,
    delta_log_versions,
    load_state,
    plan_build,
    project_fingerprint,
    read_inputs_from_files,
    save_state,
    without_data_tests,
)


def _inputs(**datasets: list) -> BuildInputs:
    return BuildInputs(
        project="p1",
        datasets=datasets or {"ssb_receive_attempts": [3, "b1"], "ssb_queue_states": [1, "b1"]},
        ops={"action_log": 0},
    )


def _last(inputs: BuildInputs) -> dict:
    return {"built_at": "2026-11-23T00:00:00+00:00", **inputs.__dict__}


def test_nothing_new_skips_and_says_why() -> None:
    inputs = _inputs()
    args, reason, changed = plan_build(inputs, _last(_inputs()))
    assert args is None and changed == []
    assert "nothing new" in reason and "b1" in reason


def test_first_build_project_change_and_full_refresh_run_the_whole_selector() -> None:
    inputs = _inputs()
    assert plan_build(inputs, None)[0] == PRODUCTION
    changed_project = _last(_inputs())
    changed_project["project"] = "p0"
    args, reason, _ = plan_build(inputs, changed_project)
    assert args == PRODUCTION and "project changed" in reason
    refresh = plan_build(inputs, _last(inputs), full_refresh=True)[0]
    assert refresh == [*PRODUCTION, "--full-refresh"]


def test_new_batch_selects_what_is_downstream_of_its_sources_only() -> None:
    before = _inputs()
    after = _inputs(ssb_receive_attempts=[4, "b2"], ssb_queue_states=[1, "b1"])
    args, _, changed = plan_build(after, _last(before))
    assert changed == ["ssb_receive_attempts"]
    assert args == [
        "build",
        "--select",
        *INGEST_SELECTORS,
        "source:service_broker.ssb_receive_attempts+",
        *NO_UNIT_TESTS,
        *NOT_ON_DEMAND,
    ]
    # A new dataset (first jms batch) counts as new input too.
    newer = _inputs(**after.datasets, jms_receive_attempts=[1, "b3"])
    args, _, changed = plan_build(newer, _last(after))
    assert changed == ["jms_receive_attempts"]
    assert "source:jms.jms_receive_attempts+" in args


def test_an_apply_reruns_what_reads_the_remediation_ledger() -> None:
    before = _inputs()
    after = _inputs()
    after.ops = {"action_log": 5}
    args, _, changed = plan_build(after, _last(before))
    assert changed == ["ops.action_log"]
    assert args == ["build", "--select", "source:ops.action_log+", *NO_UNIT_TESTS, *NOT_ON_DEMAND]
    # An operator's resume (or replay) request reruns what reads the requests.
    after.ops = {"action_log": 0, "resume_requests": 1}
    args, _, changed = plan_build(after, _last(before))
    assert changed == ["remediation_ops.resume_requests"]
    assert "source:remediation_ops.resume_requests+" in args
    # The first build found no ops database (its hook creates the ledger empty): 0 rows, no news.
    first = _inputs()
    first.ops = {}
    assert plan_build(_inputs(), _last(first))[0] is None


def test_unknown_dataset_or_vanished_ledger_rows_build_everything() -> None:
    before = _inputs()
    odd = _inputs(**before.datasets, mq_receive_attempts=[1, "b2"])
    assert plan_build(odd, _last(before))[0] == PRODUCTION
    fewer = _inputs(ssb_receive_attempts=[3, "b1"])
    args, reason, _ = plan_build(fewer, _last(before))
    assert args == PRODUCTION and "disappeared" in reason


def test_project_fingerprint_follows_model_files_only(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "dbt_project.yml").write_text("name: x\n")
    (tmp_path / "models" / "a.sql").write_text("select 1")
    first = project_fingerprint(tmp_path)
    (tmp_path / "README.md").write_text("docs do not change a build")
    assert project_fingerprint(tmp_path) == first
    (tmp_path / "models" / "a.sql").write_text("select 2")
    assert project_fingerprint(tmp_path) != first


def test_state_round_trip_per_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    assert load_state("local") is None
    save_state("local", _inputs(), PRODUCTION)
    save_state("cluster", BuildInputs(project="p9"), PRODUCTION)
    local = load_state("local")
    assert local is not None and local["datasets"] == _inputs().datasets
    assert local["dbt_args"] == PRODUCTION
    assert plan_build(_inputs(), local)[0] is None
    (tmp_path / "home" / "production_build.json").write_text("{not json")
    assert load_state("local") is None  # unreadable: build everything, write a fresh record


def test_the_recorded_stamp_is_handed_to_a_build_of_new_input_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    save_state("local", _inputs(), PRODUCTION, changes_up_to="2026-11-23 00:00:05")
    recorded = load_state("local")
    assert recorded is not None and recorded["changes_up_to"] == "2026-11-23 00:00:05"
    new_batch = _inputs(ssb_receive_attempts=[4, "b2"], ssb_queue_states=[1, "b1"])
    partial = plan_build(new_batch, recorded)[0]
    assert partial is not None and "--selector" not in partial
    assert _bound(recorded, partial) == "2026-11-23 00:00:05"
    # the whole selector (first build, changed project): a model may be behind the stamp
    assert _bound(recorded, PRODUCTION) is None
    assert _bound(None, partial) is None
    # anything but a stamp (a hand-edited file), or one not older than the clock: none, and
    # the models read their own rows' newest stamp
    for stamp in (None, "2026-11-23 00:00:05' or true --", "2026-11-23T00:00:05", 5,
                  "2999-01-01 00:00:00"):  # fmt: skip
        assert _bound({**recorded, "changes_up_to": stamp}, partial) is None, stamp
    # The scoped tests' batch bound: the newest batch the recorded build had seen, when every
    # dataset's is a batch id; none for the whole selector.
    older, newer = "b20261123T000000Z_0000000a", "b20261124T000000Z_0000000b"
    seen = {**recorded, "datasets": {"ssb_receive_attempts": [3, newer], "x": [1, older]}}
    assert _batch_bound(seen, partial) == newer
    assert _batch_bound(seen, PRODUCTION) is None
    assert _batch_bound(recorded, partial) is None  # "b1" is no batch id
    assert _batch_bound(None, partial) is None


def test_without_data_tests_keeps_one_exclude_flag() -> None:
    assert without_data_tests(PRODUCTION) == [*PRODUCTION, "--exclude-resource-type", "test"]
    partial = ["build", "--select", "source:ingest+", *NO_UNIT_TESTS, *NOT_ON_DEMAND]
    assert without_data_tests(partial) == [
        "build",
        "--select",
        "source:ingest+",
        *NO_UNIT_TESTS,
        "test",
        *NOT_ON_DEMAND,
    ]


def _ledger_files(warehouse: Path, raw_db: str, ops_db: str, batches: list[str]) -> None:
    """The ledger tables as Spark writes them: Parquet parts (+ _SUCCESS); action_log by run."""
    ledger = warehouse / f"{raw_db}.db" / "ingested_files"
    ledger.mkdir(parents=True, exist_ok=True)
    rows = {"dataset": ["ssb_a", "ssb_a", "jms_b"][: len(batches)], "_batch_id": batches}
    pq.write_table(pa.table(rows), ledger / f"part-{len(batches):05d}.parquet")
    (ledger / "_SUCCESS").write_text("")
    run = warehouse / f"{ops_db}.db" / "action_log" / "run_id=r1"
    run.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"action_id": ["x", "y"]}), run / "part-00000.parquet")
    resumes = warehouse / f"{ops_db}.db" / "resume_requests"
    resumes.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"request_id": ["r"]}), resumes / "part-00000.parquet")
    (warehouse / f"{ops_db}.db" / "replay_requests").mkdir(exist_ok=True)  # none yet


def test_ledger_figures_read_from_parquet_files_without_spark(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("vars: {raw_database: raw, ops_database: ops}\n")
    warehouse = tmp_path / "warehouse"
    assert read_inputs_from_files(warehouse, project) is None  # no ledger yet: ask Spark
    _ledger_files(warehouse, "raw", "ops", ["b1", "b2", "b1"])
    shutil.rmtree(warehouse / "ops.db")
    assert read_inputs_from_files(warehouse, project) is None  # no action_log folder yet
    _ledger_files(warehouse, "raw", "ops", ["b1", "b2", "b1"])
    inputs = read_inputs_from_files(warehouse, project)
    assert inputs is not None
    assert inputs.datasets == {"jms_b": [1, "b1"], "ssb_a": [2, "b2"]}
    assert inputs.ops == {"action_log": 2, "replay_requests": 0, "resume_requests": 1}
    assert inputs.project == project_fingerprint(project)
    # A Delta table's files include deleted rows' until a vacuum: its figures come from Spark.
    (warehouse / "ops.db" / "action_log" / "_delta_log").mkdir()
    assert read_inputs_from_files(warehouse, project) is None
    # The database names go into SQL and paths: anything but an identifier is refused.
    (project / "dbt_project.yml").write_text("vars: {raw_database: 'raw`; drop'}\n")
    with pytest.raises(PoisonwatchError, match="not an identifier"):
        read_inputs_from_files(warehouse, project)


def test_delta_ledgers_at_the_recorded_versions_need_no_spark(tmp_path: Path) -> None:
    """Delta ledgers: "nothing new" only when every ledger's log is at the version the last
    build recorded; then that build's figures hold. Any other version, a missing log or no
    record: ask Spark."""
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "dbt_project.yml").write_text("vars: {raw_database: raw, ops_database: ops}\n")
    warehouse = tmp_path / "warehouse"
    folders = [
        warehouse / "raw.db" / "ingested_files",
        *(warehouse / "ops.db" / t for t in ("action_log", "replay_requests", "resume_requests")),
    ]
    for folder in folders:
        (folder / "_delta_log").mkdir(parents=True)
        (folder / "_delta_log" / f"{0:020d}.json").write_text("{}")
    (folders[0] / "_delta_log" / f"{7:020d}.json").write_text("{}")
    (folders[0] / "_delta_log" / f"{7:020d}.checkpoint.parquet").write_text("")
    (folders[0] / "_delta_log" / f"{9:020d}.json.tmp").write_text("")  # not a commit
    versions = {
        "raw.db/ingested_files": 7,
        "ops.db/action_log": 0,
        "ops.db/replay_requests": 0,
        "ops.db/resume_requests": 0,
    }
    assert delta_log_versions(folders) == versions
    last = {
        "project": project_fingerprint(project),
        "datasets": {"ssb_a": [2, "b2"]},
        "ops": {"action_log": 2},
        "delta_versions": versions,
    }
    inputs = read_inputs_from_files(warehouse, project, last=last)
    assert inputs is not None
    assert (inputs.datasets, inputs.ops) == ({"ssb_a": [2, "b2"]}, {"action_log": 2})
    assert plan_build(inputs, last)[0] is None
    assert read_inputs_from_files(warehouse, project) is None  # no record
    (folders[1] / "_delta_log" / f"{1:020d}.json").write_text("{}")  # an apply since
    assert read_inputs_from_files(warehouse, project, last=last) is None
    shutil.rmtree(folders[1] / "_delta_log")
    (folders[1] / "_delta_log").mkdir()
    assert delta_log_versions(folders) is None  # a log with no commit yet


def test_cli_build_with_nothing_new_starts_no_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`poisonwatch build` on the embedded default, its ledgers unchanged since the recorded
    build: skipped from the files alone (a JVM start would fail the test: no java on PATH)."""
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("POISONWATCH_TARGET", "local")
    monkeypatch.setenv("PATH", str(tmp_path / "no-java"))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    warehouse = Path(spark_conf("local")["spark.sql.warehouse.dir"])
    _ledger_files(warehouse, "raw", "poisonwatch_ops", ["b20261123T010000Z_00000000"])
    inputs = read_inputs_from_files(warehouse)
    assert inputs is not None
    save_state("local", inputs, PRODUCTION)

    assert cli_main(["build"]) == 0
    assert "skipped, nothing new since the production build" in capsys.readouterr().err
