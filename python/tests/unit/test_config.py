"""The runner's start-up guards without a JDK: a Java too old or missing, the shared profile, the
class archive's options (what needs the real JDK: integration/test_config_java.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from poisonwatch import config

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


def test_missing_java_stops_the_command_cleanly(tmp_path: Path) -> None:
    env = dict(os.environ, JAVA_HOME=str(tmp_path / "nowhere"), POISONWATCH_HOME=str(tmp_path))
    proc = subprocess.run(
        [str(BIN / "poisonwatch"), "sql", "select 1"], env=env, capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "Java is not installed" in proc.stderr
    assert "Traceback" not in proc.stderr


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


def test_the_cluster_takes_the_callers_spark_settings_and_keeps_its_secret_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`cluster start` copies the caller's `$SPARK_CONF_DIR/spark-defaults.conf` (JVM options
    of the driver and executors, SQL settings) into the cluster's own, before its secret, so a
    setting of the caller's cannot replace the secret; without the variable, only its own."""
    from poisonwatch.cluster.manager import Layout, caller_spark_defaults, write_spark_defaults

    layout = Layout(tmp_path / "c")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "spark-defaults.conf").write_text(
        "spark.executor.defaultJavaOptions -XX:+UseSerialGC\nspark.authenticate false\n"
    )
    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    assert caller_spark_defaults(layout) is None
    monkeypatch.setenv("SPARK_CONF_DIR", str(layout.conf))
    assert caller_spark_defaults(layout) is None  # the cluster's own folder: nothing to copy
    monkeypatch.setenv("SPARK_CONF_DIR", str(mine))
    written = write_spark_defaults(layout, caller_spark_defaults(layout))
    assert written.stat().st_mode & 0o777 == 0o600
    settings: dict[str, str] = {}
    for line in written.read_text().splitlines():  # later lines win, as in Java's Properties
        if line and not line.startswith("#"):
            key, value = line.split(None, 1)
            settings[key] = value
    assert settings["spark.executor.defaultJavaOptions"] == "-XX:+UseSerialGC"
    assert settings["spark.authenticate"] == "true"
    assert len(settings["spark.authenticate.secret"]) == 64


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


def test_a_spark_configuration_folder_is_read_off_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an archive, the launcher gets the folder's spark-defaults.conf as its properties
    file and no SPARK_CONF_DIR (which would come first on the class path and unmap the
    archive); a user's own --properties-file wins; the environment is restored after."""
    folder = tmp_path / "my conf"
    folder.mkdir()
    (folder / "spark-defaults.conf").write_text("spark.sql.codegen.wholeStage false\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(folder))
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    seen: list[tuple[str | None, str | None]] = []

    def launch(archive: str) -> None:
        with config._launch_environment(archive):
            seen.append((os.environ.get("SPARK_CONF_DIR"), os.environ.get("PYSPARK_SUBMIT_ARGS")))

    launch("-XX:SharedArchiveFile=/a.jsa")
    defaults = folder / "spark-defaults.conf"
    assert seen.pop() == (None, f"--properties-file '{defaults}' pyspark-shell")
    assert os.environ["SPARK_CONF_DIR"] == str(folder) and "PYSPARK_SUBMIT_ARGS" not in os.environ
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /mine.conf pyspark-shell")
    launch("-XX:SharedArchiveFile=/a.jsa")
    assert seen.pop() == (None, "--properties-file /mine.conf pyspark-shell")
    launch("")  # no archive: Spark's launcher as usual
    assert seen.pop() == (str(folder), "--properties-file /mine.conf pyspark-shell")
    defaults.unlink()
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    launch("-XX:SharedArchiveFile=/a.jsa")
    assert seen.pop() == (None, "pyspark-shell")


def test_data_tests_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(config.DATA_TESTS_ENV, raising=False)
    assert config.data_tests_on() is True
    for said, on in (("off", False), ("0", False), (" OFF ", False), ("on", True), ("1", True)):
        monkeypatch.setenv(config.DATA_TESTS_ENV, said)
        assert config.data_tests_on() is on, said
    monkeypatch.setenv(config.DATA_TESTS_ENV, "sometimes")
    with pytest.raises(config.PoisonwatchError, match="POISONWATCH_DATA_TESTS must be on or off"):
        config.data_tests_on()
