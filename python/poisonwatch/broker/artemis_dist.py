"""Fetch the ActiveMQ Artemis distribution from Maven Central into the virtualenv (`make setup`).

`python -m poisonwatch.broker.artemis_dist` reads the artifact pinned in pyproject.toml
(`[tool.poisonwatch.artemis]`, group:artifact:version:zip:bin), has Maven copy the zip into a
temporary folder beside `artemis_folder()`, unpacks it there and renames the result into place
with a stamp naming the artifact, so that a second call finds the stamp and fetches nothing.
`$POISONWATCH_ARTEMIS_DIR` moves the cache (a shared virtualenv need not be written to).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import tempfile
import tomllib
import zipfile
from pathlib import Path

from poisonwatch.config import PoisonwatchError, project_root
from poisonwatch.warehouse.jars import install_folder, maven, run_maven

STAMP = "artemis.json"
FOLDER_ENV = "POISONWATCH_ARTEMIS_DIR"


def artemis_folder() -> Path:
    """The cache: `$POISONWATCH_ARTEMIS_DIR`, else the virtualenv beside Delta Lake's jars."""
    env = os.environ.get(FOLDER_ENV)
    if env:
        return Path(env).expanduser().resolve()
    return Path(sys.prefix) / "share" / "poisonwatch" / "artemis"


def artemis_artifact(pyproject: Path | None = None) -> str:
    """The pinned `group:artifact:version:zip:bin` from [tool.poisonwatch.artemis]."""
    path = pyproject or project_root() / "pyproject.toml"
    try:
        artifact = tomllib.loads(path.read_text())["tool"]["poisonwatch"]["artemis"]["artifact"]
    except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
        raise PoisonwatchError(f"{path}: no [tool.poisonwatch.artemis] artifact ({exc})") from exc
    parts = str(artifact).split(":")
    if len(parts) != 5 or parts[3] != "zip" or not all(parts):
        raise PoisonwatchError(
            f"{path}: [tool.poisonwatch.artemis] artifact {artifact!r} is not "
            "group:artifact:version:zip:classifier"
        )
    return str(artifact)


def installed_home(folder: Path | None = None, artifact: str | None = None) -> Path | None:
    """ARTEMIS_HOME of the unpacked distribution when the stamp names `artifact`, else None."""
    folder = folder or artemis_folder()
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return None
    if stamp.get("artifact") != (artifact or artemis_artifact()):
        return None
    home = folder / str(stamp.get("home", ""))
    return home if (home / "bin" / "artemis").is_file() else None


def _unzip(archive: Path, into: Path) -> None:
    """Unpack keeping the executable bits (zipfile itself drops them), refusing paths that
    leave `into`."""
    root = into.resolve()
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            target = (into / info.filename).resolve()
            if not target.is_relative_to(root):
                raise PoisonwatchError(f"{archive.name}: entry {info.filename!r} leaves the folder")
            zf.extract(info, into)
            mode = (info.external_attr >> 16) & 0o777
            if mode and not info.is_dir():
                target.chmod(mode | stat.S_IRUSR)


def fetch_artemis(folder: Path | None = None) -> Path:
    """Fetch and unpack the pinned distribution unless it is there; returns ARTEMIS_HOME."""
    folder = folder or artemis_folder()
    artifact = artemis_artifact()
    home = installed_home(folder, artifact)
    if home is not None:
        return home
    mvn = maven(f"ActiveMQ Artemis ({artifact})")
    folder.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="poisonwatch-artemis-", dir=folder.parent) as tmp:
        work = Path(tmp)
        run_maven(
            mvn,
            ["dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={work / 'zip'}"],
            work,
            artifact,
        )
        zips = sorted((work / "zip").glob("*.zip"))
        if len(zips) != 1:
            raise PoisonwatchError(f"mvn fetched {len(zips)} zip files for {artifact}, not one")
        staged = work / "staged"
        staged.mkdir()
        _unzip(zips[0], staged)
        homes = [p for p in staged.iterdir() if (p / "bin" / "artemis").is_file()]
        if len(homes) != 1:
            raise PoisonwatchError(f"{zips[0].name} has no single folder with bin/artemis")
        stamp = {"artifact": artifact, "home": homes[0].name}
        (staged / STAMP).write_text(json.dumps(stamp, indent=2) + "\n")
        install_folder(staged, folder)
    return folder / homes[0].name


def main() -> int:
    try:
        home = fetch_artemis()
    except PoisonwatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"ActiveMQ Artemis in {home}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
