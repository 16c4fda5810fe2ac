"""Write the JVM class archive that every later Spark start maps (config.class_archive_options).

`make setup` runs `python -m poisonwatch.warehouse.class_archive` once per install. A child
process starts Spark on a throwaway store with `-XX:ArchiveClassesAtExit`, does what commands do
(Hive metastore, Delta and Parquet tables, JSON and CSV reads, windows, aggregates), and stops;
its JVM writes the classes it loaded as it exits. The file is installed only after a JVM has
mapped it and exited cleanly: a cut archive crashes the JVM that maps it, so a half-written one
must never take the archive's place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from poisonwatch.config import (
    CLASS_ARCHIVE_DUMP_ENV,
    CLASS_ARCHIVE_ENV,
    CLASS_ARCHIVE_NAME,
    PoisonwatchError,
    check_java,
    class_archive_path,
)

# What the child does: the statements and readers the commands use, on a few rows.
WORKLOAD = """
import json
from pathlib import Path
from poisonwatch.config import home, spark_session, stop_spark
spark = spark_session("local")
landing = home() / "landing"
landing.mkdir(parents=True, exist_ok=True)
(landing / "a.jsonl").write_text(json.dumps({"k": "a", "t": "2026-01-01T00:00:00Z", "n": 1}))
(landing / "a.csv").write_text("k,t,n\\nb,2026-01-01T00:00:01Z,2\\n")
spark.sql("create database if not exists warm")
spark.read.json(str(landing / "a.jsonl")).createOrReplaceTempView("j")
spark.read.option("header", True).csv(str(landing / "a.csv")).createOrReplaceTempView("c")
spark.sql(
    "create table warm.t using parquet partitioned by (p) as "
    "select k, cast(t as timestamp) as t, cast(n as int) as n, 1 as p from j "
    "union all select k, cast(t as timestamp), cast(n as int), 2 from c"
)
spark.sql("insert into warm.t select k, t, n + 1, p from warm.t")
spark.sql("create table warm.d using delta partitioned by (p) as select * from warm.t")
spark.sql(
    "merge into warm.d using (select k, max(n) as n from warm.t group by k) as s on d.k = s.k "
    "when matched then update set n = s.n"
)
spark.sql("delete from warm.d where p = 2")
spark.sql("describe detail warm.d").collect()
spark.sql(
    "select k, max_by(n, t), count(*), lag(n) over (partition by k order by t) as prev, "
    "sha2(k, 256), regexp_replace(k, '[0-9]', '#') from warm.t group by k, n, t"
).collect()
spark.sql("show table extended in warm like '*'").collect()
spark.sql("describe table extended warm.t").collect()
spark.sql("drop table warm.t")
# The class path the archive is bound to: the check maps the archive against it.
Path("classpath.txt").write_text(spark._jvm.System.getProperty("java.class.path"))
# The JVM dumps the archive while it exits (22 s on a quiet machine): a loaded one can take
# more than the commands' 30 s, and a kill leaves no archive. The builder's timeout bounds it.
stop_spark(timeout=None)
"""


def build_class_archive() -> Path:
    """Write, check and install the class archive; returns its path."""
    java = check_java()
    target = class_archive_path(java)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="poisonwatch-classes-") as tmp:
        partial = Path(tmp) / "spark-classes.jsa"
        env = {
            **os.environ,
            "POISONWATCH_HOME": str(Path(tmp) / "home"),
            "POISONWATCH_TARGET": "local",
            "POISONWATCH_DRIVER_MEMORY": "1g",
            CLASS_ARCHIVE_DUMP_ENV: str(partial),
        }
        env.pop(CLASS_ARCHIVE_ENV, None)
        child = subprocess.run(
            [sys.executable, "-c", WORKLOAD],
            env=env,
            cwd=tmp,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        classpath = Path(tmp) / "classpath.txt"
        if child.returncode != 0 or not partial.is_file() or not classpath.is_file():
            raise PoisonwatchError(
                "the class archive was not written: Spark's run for it failed\n"
                + (child.stderr or child.stdout)[-2000:]
            )
        # Copied beside its final name and checked there (a full disk cuts a copy too), then
        # renamed over the old one in one step.
        installed = target.with_name(f"{target.name}.{os.getpid()}.new")
        try:
            shutil.copyfile(partial, installed)
            check_archive(java.path, installed, classpath.read_text(), cwd=Path(tmp))
            shutil.copyfile(classpath, classpath_file(target))
            os.replace(installed, target)
        finally:
            installed.unlink(missing_ok=True)
    for old in stale_archives(target):
        old.unlink(missing_ok=True)
        classpath_file(old).unlink(missing_ok=True)
    return target


def stale_archives(target: Path) -> list[Path]:
    """Archives of an earlier Java or pyspark beside `target`, when `target` is one of the
    per-virtualenv archives (`spark-classes-<key>.jsa`): a file named by
    $POISONWATCH_CLASS_ARCHIVE leaves the other files of its folder alone."""
    if not CLASS_ARCHIVE_NAME.fullmatch(target.name):
        return []
    return sorted(
        p for p in target.parent.iterdir() if p != target and CLASS_ARCHIVE_NAME.fullmatch(p.name)
    )


def classpath_file(archive: Path) -> Path:
    """Beside the archive: the class path it was written on (to check it again later)."""
    return archive.with_suffix(".classpath")


def check_archive(java: str, archive: Path, classpath: str, cwd: Path) -> None:
    """A JVM on Spark's class path maps the archive (-Xshare:on: or it stops) and exits
    cleanly; else PoisonwatchError. A cut archive crashes it, another class path stops it."""
    probe = subprocess.run(
        [
            java,
            "-Xshare:on",
            f"-XX:SharedArchiveFile={archive}",
            "-Xlog:cds*=off",
            "-cp",
            classpath,
            "-version",
        ],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if probe.returncode != 0:
        raise PoisonwatchError(
            f"the class archive {archive} does not load (java exited {probe.returncode}); "
            "it was not installed"
        )


def main() -> int:
    try:
        path = build_class_archive()
    except (PoisonwatchError, OSError, subprocess.TimeoutExpired) as exc:
        print(f"class archive not built, Spark starts without it: {exc}", file=sys.stderr)
        return 1
    print(f"class archive: {path} ({path.stat().st_size // 2**20} MiB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
