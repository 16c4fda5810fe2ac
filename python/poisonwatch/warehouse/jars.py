"""Fetch Delta Lake's jars from Maven Central into the virtualenv (`make setup`).

`python -m poisonwatch.warehouse.jars` reads the artifacts pinned in pyproject.toml
(`[tool.poisonwatch.jars]`), has Maven copy them and their runtime dependencies into a
temporary folder, keeps the jars whose names start with one of `keep` (the others are in
pyspark's own jars already) and moves them into `config.jar_folder()`, whose `*` the driver's
class path names. Spark's own resolver (`spark.jars.packages`) is not used: it cannot reach
Maven Central here, and a Thrift server started in the driver finds Delta's catalog only on
the driver's class path.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from xml.sax.saxutils import escape

from poisonwatch.config import PoisonwatchError, jar_folder, project_root

STAMP = "jars.json"


def jar_spec(pyproject: Path | None = None) -> dict[str, list[str]]:
    """`{"artifacts": [...], "keep": [...]}` from pyproject.toml's [tool.poisonwatch.jars]."""
    path = pyproject or project_root() / "pyproject.toml"
    try:
        spec = tomllib.loads(path.read_text())["tool"]["poisonwatch"]["jars"]
    except (OSError, KeyError, tomllib.TOMLDecodeError) as exc:
        raise PoisonwatchError(f"{path}: no [tool.poisonwatch.jars] table ({exc})") from exc
    artifacts, keep = list(spec.get("artifacts", [])), list(spec.get("keep", []))
    for coordinate in artifacts:
        if len(coordinate.split(":")) != 3:
            raise PoisonwatchError(
                f"{path}: [tool.poisonwatch.jars] artifact {coordinate!r} is not "
                "group:artifact:version"
            )
    if not artifacts or not keep:
        raise PoisonwatchError(f"{path}: [tool.poisonwatch.jars] needs `artifacts` and `keep`")
    return {"artifacts": artifacts, "keep": keep}


def pom(artifacts: list[str]) -> str:
    """A pom that depends on `artifacts` and nothing else."""
    deps = "".join(
        "<dependency><groupId>{}</groupId><artifactId>{}</artifactId>"
        "<version>{}</version></dependency>".format(*map(escape, a.split(":")))
        for a in artifacts
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>poisonwatch</groupId><artifactId>jars</artifactId><version>1</version>"
        f"<dependencies>{deps}</dependencies></project>"
    )


def jars_present(folder: Path | None = None, spec: dict[str, list[str]] | None = None) -> bool:
    """Whether `folder` holds the jars of `spec` (the stamp names what was fetched)."""
    folder = folder or jar_folder()
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return False
    wanted = spec or jar_spec()
    return stamp.get("spec") == wanted and all((folder / n).is_file() for n in stamp["jars"])


def maven(what: str) -> str:
    """The `mvn` on PATH; without one, an error naming `what` it was needed for."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PoisonwatchError(
            f"poisonwatch needs Maven (`mvn`, e.g. apt-get install maven) to fetch {what} "
            "from Maven Central"
        )
    return mvn


def run_maven(mvn: str, args: list[str], cwd: Path, what: str) -> None:
    """`mvn -B -q ARGS` in `cwd`; when it fails, an error with Maven's last lines."""
    run = subprocess.run([mvn, "-B", "-q", *args], capture_output=True, text=True, cwd=cwd)
    if run.returncode != 0:
        tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-15:])
        raise PoisonwatchError(
            f"mvn could not fetch {what} from Maven Central (is it reachable? a proxy goes in "
            f"~/.m2/settings.xml):\n{tail}"
        )


def install_folder(staged: Path, folder: Path) -> None:
    """`staged` becomes `folder`. An existing `folder` is first moved beside `staged`, into
    the temporary folder that holds it and takes it away on exit."""
    if folder.exists():
        folder.rename(staged.parent / "old")
    staged.rename(folder)


def fetch_jars(folder: Path | None = None) -> list[str]:
    """Fetch the pinned jars into `folder` unless they are there; returns the jar names."""
    folder = folder or jar_folder()
    spec = jar_spec()
    if jars_present(folder, spec):
        return json.loads((folder / STAMP).read_text())["jars"]
    mvn = maven(f"Delta Lake's jars ({', '.join(spec['artifacts'])})")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="poisonwatch-jars-", dir=folder.parent) as tmp:
        work = Path(tmp)
        (work / "pom.xml").write_text(pom(spec["artifacts"]))
        out = work / "jars"
        run_maven(
            mvn,
            [
                "-f",
                str(work / "pom.xml"),
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                f"-DoutputDirectory={out}",
            ],
            work,
            ", ".join(spec["artifacts"]),
        )
        names = sorted(
            p.name for p in out.glob("*.jar") if any(p.name.startswith(k) for k in spec["keep"])
        )
        if not names:
            raise PoisonwatchError(f"mvn fetched no jar starting with {spec['keep']} into {out}")
        staged = work / "staged"
        staged.mkdir()
        for name in names:
            shutil.copy2(out / name, staged / name)
        (staged / STAMP).write_text(json.dumps({"spec": spec, "jars": names}, indent=2) + "\n")
        install_folder(staged, folder)
    return names


def main() -> int:
    try:
        names = fetch_jars()
    except PoisonwatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{len(names)} jars in {jar_folder()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
