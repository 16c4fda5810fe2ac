"""The runner's start-up guards: Java version, a busy store, the shared profile."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from poisonwatch import config

ROOT = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent


def _fake_java(tmp_path: Path, version_line: str) -> Path:
    """A JAVA_HOME whose `java -version` prints the given line (as a real JDK would, on stderr)."""
    java_home = tmp_path / "jdk"
    (java_home / "bin").mkdir(parents=True)
    java = java_home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IEXEC)
    return java_home


def test_java_too_old_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'openjdk version "11.0.21" 2023')))
    with pytest.raises(config.PoisonwatchError, match=r"Java 11 found.*needs Java 17"):
        config.check_java()


def test_java_8_style_version_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path, 'java version "1.8.0_362"')))
    with pytest.raises(config.PoisonwatchError, match="Java 8 found"):
        config.check_java()


def test_java_missing_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(config.PoisonwatchError, match="Java is not installed"):
        config.check_java()


def test_real_java_is_accepted() -> None:
    info = config.check_java()
    assert info.major >= 17


def test_missing_java_stops_the_command_cleanly(tmp_path: Path) -> None:
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "nowhere"), POISONWATCH_HOME=str(tmp_path))
    proc = subprocess.run(
        [str(BIN / "poisonwatch"), "sql", "select 1"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Java is not installed" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_busy_store_is_reported_plainly(tmp_path: Path) -> None:
    env = dict(os.environ, POISONWATCH_HOME=str(tmp_path / "store"))
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from poisonwatch import config; config.acquire_store_lock(); "
            "print('held', flush=True); time.sleep(60)",
        ],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        proc = subprocess.run(
            [str(BIN / "poisonwatch"), "sql", "select 1"], env=env, capture_output=True, text=True
        )
        assert proc.returncode == 2
        assert "is in use by poisonwatch pid" in proc.stderr
        assert "one process at a time" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert time.monotonic() - start < 30
    finally:
        holder.kill()
        holder.wait()


def test_profile_renders_store_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "h"))
    conf = config.spark_conf("local")
    assert conf["spark.sql.warehouse.dir"] == f"{tmp_path}/h/warehouse"
    assert (
        f"databaseName={tmp_path}/h/metastore_db"
        in conf["spark.hadoop.javax.jdo.option.ConnectionURL"]
    )
    assert conf["spark.sql.session.timeZone"] == "UTC"
    cluster = config.load_profile("cluster")
    assert cluster["method"] == "thrift" and cluster["host"]


def test_profile_leaves_code_generation_and_the_jvm_to_spark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The profile a user runs keeps Spark's code generation and the JVM's own defaults; test-only
    tuning comes from a Spark configuration folder (scripts/test.sh's $SPARK_CONF_DIR)."""
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "h"))
    conf = config.spark_conf("local")
    assert not [k for k in conf if k.startswith("spark.sql.codegen.")], conf
    assert "-XX:" not in conf["spark.driver.extraJavaOptions"], conf


def test_partition_listing_on_the_driver_locally_not_on_the_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The embedded default lists partition folders on the driver (a listing job costs more than
    the listing on one machine's disk); the cluster's Thrift server keeps Spark's parallel
    listing, and the SQL semantics both share."""
    from poisonwatch.cluster.manager import Layout, Settings, thrift_conf

    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "h"))
    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    local = config.spark_conf("local")
    assert int(local[key]) >= 1000
    thrift = thrift_conf(Layout(tmp_path / "c"), Settings(), "spark://127.0.0.1:7077")
    assert key not in thrift
    shared = "spark.sql.sources.partitionOverwriteMode"
    assert thrift[shared] == local[shared] == "dynamic"


def _sql_json(env: dict[str, str], query: str) -> list[dict]:
    """The rows `poisonwatch sql --format json` prints for one query (it must succeed)."""
    proc = subprocess.run(
        [str(BIN / "poisonwatch"), "sql", query, "--format", "json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [json.loads(line) for line in proc.stdout.splitlines()]


def test_sql_command_formats(tmp_path: Path) -> None:
    env = dict(os.environ, POISONWATCH_HOME=str(tmp_path / "store"))
    query = (
        "select 1 as n, 'it''s ok' as s, timestamp'2026-03-01 10:00:00.123456' as at "
        "union all select 2, null, null"
    )
    rows = _sql_json(env, query)
    assert rows == [
        {"n": 1, "s": "it's ok", "at": "2026-03-01T10:00:00.123456Z"},
        {"n": 2, "s": None, "at": None},
    ]
    proc = subprocess.run(
        [str(BIN / "poisonwatch"), "sql", query, "--format", "csv"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.splitlines()[0] == "n,s,at"
    assert proc.stdout.splitlines()[1].startswith("1,it's ok,2026-03-01T10:00:00.123456")


# --- the class archive (config.class_archive_options, warehouse/class_archive.py) -------------


def test_class_archive_options_follow_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    java = config.JavaInfo(path="/usr/bin/java", major=17, text='openjdk version "17"')
    archive = tmp_path / "spark.jsa"
    monkeypatch.setenv(config.CLASS_ARCHIVE_ENV, str(archive))
    monkeypatch.delenv(config.CLASS_ARCHIVE_DUMP_ENV, raising=False)
    assert config.class_archive_options(java) == ""  # no archive yet: Spark starts without
    archive.write_bytes(b"x")
    assert config.class_archive_options(java) == f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off"
    spaced = tmp_path / "a b.jsa"
    spaced.write_bytes(b"x")
    monkeypatch.setenv(config.CLASS_ARCHIVE_ENV, str(spaced))
    assert config.class_archive_options(java) == ""  # extraJavaOptions splits on spaces
    monkeypatch.setenv(config.CLASS_ARCHIVE_ENV, "off")
    assert config.class_archive_options(java) == ""
    monkeypatch.setenv(config.CLASS_ARCHIVE_DUMP_ENV, str(tmp_path / "new.jsa"))
    assert config.class_archive_options(java) == f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"


def test_setup_wrote_a_class_archive_that_maps_and_a_cut_one_is_refused(tmp_path: Path) -> None:
    from poisonwatch.warehouse.class_archive import check_archive, classpath_file

    java = config.check_java()
    archive = config.class_archive_path(java)
    assert archive.is_file(), (
        f"no class archive at {archive}: `make setup` writes it "
        "(python -m poisonwatch.warehouse.class_archive)"
    )
    classpath = classpath_file(archive).read_text()
    check_archive(java.path, archive, classpath, cwd=tmp_path)  # -Xshare:on: maps, or fails
    cut = tmp_path / "cut.jsa"
    with archive.open("rb") as src:
        cut.write_bytes(src.read(1 << 20))
    with pytest.raises(config.PoisonwatchError, match="does not load"):
        check_archive(java.path, cut, classpath, cwd=tmp_path)
    with pytest.raises(config.PoisonwatchError, match="does not load"):
        check_archive(java.path, archive, str(tmp_path), cwd=tmp_path)  # another class path


def test_commands_start_spark_with_the_archive_and_the_options(tmp_path: Path) -> None:
    """One driver JVM (each start is costly) answers for three things: it maps the class archive,
    a Spark configuration folder ($SPARK_CONF_DIR, as scripts/test.sh writes one) reaches it
    with its settings and its spark.driver.defaultJavaOptions beside the profile's own options,
    and a store folder with a space survives Spark's splitting of the options (the profile
    quotes it)."""
    archive = config.class_archive_path(config.check_java())
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.codegen.wholeStage false\n"
        "spark.driver.defaultJavaOptions -Dpoisonwatch.probe=on -XX:+UseSerialGC\n"
    )
    env = dict(os.environ, POISONWATCH_HOME=str(tmp_path / "a store"), SPARK_CONF_DIR=str(conf_dir))
    env.pop(config.CLASS_ARCHIVE_ENV, None)
    prop = "java_method('java.lang.System', 'getProperty', '{}')"
    (row,) = _sql_json(
        env,
        f"select {prop.format('poisonwatch.probe')} as probe, "
        f"{prop.format('derby.system.home')} as derby_home, "
        f"{prop.format('spark.sql.codegen.wholeStage')} as whole_stage, "
        f"{prop.format('spark.driver.extraJavaOptions')} as options",
    )
    options = row.pop("options")
    assert f"-XX:SharedArchiveFile={archive} -Xlog:cds*=off" in options
    assert row == {"probe": "on", "derby_home": env["POISONWATCH_HOME"], "whole_stage": "false"}


def test_only_earlier_per_venv_archives_are_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from poisonwatch.config import (
        CLASS_ARCHIVE_ENV,
        CLASS_ARCHIVE_NAME,
        check_java,
        class_archive_path,
    )
    from poisonwatch.warehouse.class_archive import stale_archives

    # The name the builder looks for is the name class_archive_path gives.
    monkeypatch.delenv(CLASS_ARCHIVE_ENV, raising=False)
    assert CLASS_ARCHIVE_NAME.fullmatch(class_archive_path(check_java()).name)

    names = ["spark-classes-0123456789ab.jsa", "spark-classes-ba9876543210.jsa", "mine.jsa"]
    for name in [*names, "spark-classes-ba9876543210.classpath", "spark-classes-x.jsa"]:
        (tmp_path / name).write_bytes(b"x")
    current, earlier, custom = (tmp_path / n for n in names)
    assert stale_archives(current) == [earlier]
    # A file named by $POISONWATCH_CLASS_ARCHIVE: its folder is someone else's.
    assert stale_archives(custom) == []
