"""Delta Lake's jars (poisonwatch.warehouse.jars) and the table format setting, without a JVM:
the pins read from pyproject.toml, the pom handed to Maven, what setup checks before and after a
fetch, and the clear errors of a missing mvn, missing jars or an unknown format. The fetch
itself runs in `make setup` against Maven Central."""

from __future__ import annotations

import json
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from poisonwatch import config
from poisonwatch.warehouse import jars

ROOT = Path(__file__).resolve().parents[3]


def test_pins_move_together() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pins = dict(d.split("==") for d in project["dependencies"] if "==" in d)
    spec = jars.jar_spec()
    (artifact,) = spec["artifacts"]
    group, name, version = artifact.split(":")
    # delta-spark's wheel and its jar are one release, built for pyspark's minor version.
    assert pins["delta-spark"] == version, (pins, artifact)
    spark_minor = ".".join(pins["pyspark"].split(".")[:2])
    assert (group, name) == ("io.delta", f"delta-spark_{spark_minor}_2.13"), artifact


def test_the_pom_names_each_artifact_once_and_escapes_text() -> None:
    text = jars.pom(["io.delta:delta-spark_4.1_2.13:4.3.1", "a&b:c<d:1"])
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    deps = ET.fromstring(text).findall("m:dependencies/m:dependency", ns)
    got = [
        tuple(d.find(f"m:{k}", ns).text for k in ("groupId", "artifactId", "version")) for d in deps
    ]
    assert got == [("io.delta", "delta-spark_4.1_2.13", "4.3.1"), ("a&b", "c<d", "1")]


def test_a_bad_spec_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "pyproject.toml"
    bad.write_text('[tool.poisonwatch.jars]\nartifacts = ["io.delta:delta-spark"]\nkeep = ["d"]\n')
    with pytest.raises(config.PoisonwatchError, match="not group:artifact:version"):
        jars.jar_spec(bad)
    bad.write_text("[tool.other]\n")
    with pytest.raises(config.PoisonwatchError, match=r"no \[tool.poisonwatch.jars\]"):
        jars.jar_spec(bad)


def test_jars_present_needs_the_stamp_of_the_same_spec(tmp_path: Path) -> None:
    spec = jars.jar_spec()
    assert not jars.jars_present(tmp_path, spec)
    (tmp_path / "delta-spark.jar").write_bytes(b"PK")
    stamp = {"spec": spec, "jars": ["delta-spark.jar"]}
    (tmp_path / jars.STAMP).write_text(json.dumps(stamp))
    assert jars.jars_present(tmp_path, spec)
    other = {**spec, "artifacts": ["io.delta:delta-spark_4.1_2.13:9.9.9"]}
    assert not jars.jars_present(tmp_path, other)
    (tmp_path / "delta-spark.jar").unlink()
    assert not jars.jars_present(tmp_path, spec)


def test_a_missing_mvn_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(config.PoisonwatchError, match=r"needs Maven \(`mvn`"):
        jars.fetch_jars(tmp_path / "jars")


def test_missing_jars_are_named_before_spark_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POISONWATCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv(config.JARS_ENV, str(tmp_path / "none" / "*"))
    with pytest.raises(config.PoisonwatchError, match="Delta Lake's jars are not in"):
        config.check_jars()


def test_the_table_format_is_the_projects_var(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POISONWATCH_FILE_FORMAT", raising=False)
    assert config.table_format() == "delta"
    monkeypatch.setenv("POISONWATCH_FILE_FORMAT", "Parquet")
    assert config.table_format() == "parquet"
    monkeypatch.setenv("POISONWATCH_FILE_FORMAT", "orc")
    with pytest.raises(config.PoisonwatchError, match="supports delta and parquet"):
        config.table_format()
