"""Start-up guards and options that need the real JDK: the installed Java is accepted, a busy
store is reported before Spark starts, `sql`'s output formats, the class archive maps and a cut
one is refused, and a driver starts with the archive and a Spark configuration folder's options
(the pure parts: unit/test_config.py)."""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.child_python import run_cli_calls

from poisonwatch import config

BIN = Path(sys.executable).parent


def test_real_java_is_accepted() -> None:
    info = config.check_java()
    assert info.major >= 17


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
    as_json, as_csv = run_cli_calls(
        [["sql", query, "--format", "json"], ["sql", query, "--format", "csv"]], env
    )
    assert as_json.returncode == as_csv.returncode == 0, as_json.stderr + as_csv.stderr
    assert [json.loads(line) for line in as_json.stdout.splitlines()] == [
        {"n": 1, "s": "it's ok", "at": "2026-03-01T10:00:00.123456Z"},
        {"n": 2, "s": None, "at": None},
    ]
    assert as_csv.stdout.splitlines()[0] == "n,s,at"
    assert as_csv.stdout.splitlines()[1].startswith("1,it's ok,2026-03-01T10:00:00.123456")


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
    quotes it). The archive is seen mapped in the JVM's own class-load log: Spark's launcher
    puts a configuration folder first on the class path, where it would unmap the archive."""
    archive = config.class_archive_path(config.check_java())
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    loaded = tmp_path / "classes.log"
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.sql.codegen.wholeStage false\n"
        "spark.driver.defaultJavaOptions -Dpoisonwatch.probe=on -XX:+UseSerialGC "
        f"-Xlog:class+load=info:file={loaded}\n"
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
    # Spark's own classes came from the archive (its top layer), not from their jars.
    sources = collections.Counter(
        line.rsplit("source: ", 1)[-1].strip()
        for line in loaded.read_text().splitlines()
        if "source: " in line
    )
    assert sources["shared objects file (top)"] > 10_000, sources.most_common(5)


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
