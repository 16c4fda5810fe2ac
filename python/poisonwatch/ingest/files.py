"""The Python side of ingest: list the landing files, hash them, read CSV headers.

No records pass through here: Spark reads the data. Python only decides which files to load
(content hash = idempotency key) and finds file-level problems it can name better than Spark
(unknown folder or extension, unreadable file, CSV header without the required columns).
"""

from __future__ import annotations

import csv
import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from poisonwatch.warehouse.schemas import DATASETS, Dataset

FORMATS = {".jsonl.gz": "jsonl", ".jsonl": "jsonl", ".csv": "csv", ".parquet": "parquet"}
HASH_CHUNK = 1 << 20
MAX_HEADER_BYTES = 1 << 20


@dataclass
class LandingFile:
    path: Path
    dataset: str
    fmt: str | None = None
    size: int = 0
    content_hash: str = ""
    problem: str | None = None  # a file-level reject found before Spark runs
    misplaced: bool = False  # the problem is the file's name or folder, not its bytes
    csv_header: list[str] | None = None
    open_last_line: bool = False  # CSV: the last line has no line end (the file may be cut)

    @property
    def source(self) -> str:
        return str(self.path)

    @property
    def ledger_key(self) -> str:
        """The idempotency key: the content hash, or, for a file rejected for its name or
        folder, a key that changes when it is renamed or moved (so a fixed file then loads)."""
        if not self.misplaced:
            return self.content_hash
        place = f"{self.content_hash}|{self.dataset}|{self.path.name}"
        return "misplaced:" + hashlib.sha256(place.encode()).hexdigest()


@dataclass
class Landing:
    root: Path
    files: list[LandingFile] = field(default_factory=list)
    unknown_folders: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # top-level files, hidden/marker files


def file_format(name: str) -> str | None:
    for suffix, fmt in FORMATS.items():
        if name.endswith(suffix):
            return fmt
    return None


def _hidden(name: str) -> bool:
    """Hidden files and Spark/Hadoop markers (`.x.crc`, `_SUCCESS`) are not landing files."""
    return name.startswith((".", "_"))


def _walk(folder: Path) -> list[Path]:
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d))
        found.extend(Path(dirpath) / n for n in sorted(filenames))
    return found


def scan_landing(root: Path) -> Landing:
    """Every file under the dataset folders of `root`, in a stable order; nothing hashed yet."""
    landing = Landing(root=root)
    for entry in sorted(root.iterdir()):
        if _hidden(entry.name):
            landing.ignored.append(str(entry))
            continue
        if not entry.is_dir():
            landing.ignored.append(str(entry))
            continue
        known = entry.name in DATASETS
        if not known:
            landing.unknown_folders.append(entry.name)
        for path in _walk(entry):
            if _hidden(path.name):
                landing.ignored.append(str(path))
                continue
            f = LandingFile(path=path, dataset=entry.name, fmt=file_format(path.name))
            f.misplaced = not known or f.fmt is None or ":" in path.name
            if not known:
                f.problem = (
                    f"unknown dataset folder {entry.name!r} "
                    f"(expected one of: {', '.join(sorted(DATASETS))})"
                )
            elif f.fmt is None:
                f.problem = "unknown file type (expected .jsonl, .jsonl.gz, .csv or .parquet)"
            elif ":" in path.name:
                f.problem = "file name contains ':', which Spark cannot read: rename the file"
            landing.files.append(f)
    return landing


def hash_file(f: LandingFile) -> None:
    """sha256 of the bytes (the ledger key). An unreadable file gets a key from its path."""
    digest = hashlib.sha256()
    try:
        with open(f.path, "rb") as fh:
            while chunk := fh.read(HASH_CHUNK):
                digest.update(chunk)
                f.size += len(chunk)
    except OSError as exc:
        f.problem = f"unreadable file: {exc.strerror or exc}"
        f.content_hash = "unreadable:" + hashlib.sha256(str(f.path).encode()).hexdigest()
        return
    f.content_hash = digest.hexdigest()


def read_csv_header(f: LandingFile, dataset: Dataset) -> None:
    """Read the header row; a header without the required columns rejects the file."""
    try:
        with open(f.path, "rb") as fh:
            raw = fh.readline(MAX_HEADER_BYTES)
    except OSError as exc:
        f.problem = f"unreadable file: {exc.strerror or exc}"
        return
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff").rstrip("\r\n")
    except UnicodeDecodeError:
        f.problem = "CSV header is not UTF-8 text"
        return
    if not text.strip():
        f.problem = "CSV file has no header row (first line empty)"
        return
    header = next(csv.reader([text]))
    names = [h.strip().lower() for h in header]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        f.problem = f"CSV header repeats column(s): {', '.join(dupes)}"
        return
    missing = [c.name for c in dataset.columns if c.required and c.name.lower() not in names]
    if missing:
        f.problem = f"CSV header lacks required column(s): {', '.join(missing)}"
        return
    f.csv_header = header
    f.open_last_line = _ends_without_newline(f.path)


def _ends_without_newline(path: Path) -> bool:
    """True when the file's last byte is not a line end: its last record may have been cut."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            if fh.tell() == 0:
                return False
            fh.seek(-1, os.SEEK_END)
            return fh.read(1) != b"\n"
    except OSError:
        return False


def prepare(landing: Landing, progress: Callable[[LandingFile], None] | None = None) -> None:
    """Hash every file, and read the header of every CSV file that is otherwise fine."""
    for f in landing.files:
        hash_file(f)
        if f.problem is None and f.fmt == "csv":
            read_csv_header(f, DATASETS[f.dataset])
        if progress is not None:
            progress(f)
