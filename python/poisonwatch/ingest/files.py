"""The Python side of ingest: list the landing files, hash them, read CSV headers.

No records pass through here: Spark reads the data. Python only decides which files to load
(content hash = idempotency key) and finds file-level problems it can name better than Spark
(unknown folder or extension, unreadable file, CSV header without the required columns,
symbolic links and other files that are not regular files).

A file to load is copied while it is hashed (`copies`, a folder of the run), and Spark reads
the copy: the bytes loaded are the bytes hashed even when the landing file is still being
written or is replaced meanwhile.
"""

from __future__ import annotations

import csv
import hashlib
import os
import stat
import uuid
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
    not_read: bool = False  # a link or a special file: never opened, so never hashed
    copy: Path | None = None  # the copy Spark reads, made from the bytes that were hashed

    @property
    def source(self) -> str:
        """The landing path: what raw tables record as the record's file."""
        return str(self.path)

    @property
    def read_source(self) -> str:
        """The path Spark reads: the copy when there is one."""
        return str(self.copy or self.path)

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
    """The files under `folder`, and the links to folders (reported, not followed)."""
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        linked = [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]
        dirnames[:] = sorted(d for d in dirnames if not _hidden(d) and d not in linked)
        found.extend(Path(dirpath) / n for n in sorted([*filenames, *linked]))
    return found


def _inside(path: str | Path, root: Path) -> bool:
    return Path(path).is_relative_to(root)


def not_readable_reason(path: Path, root: Path) -> str | None:
    """Why `path` is not read at all: a symbolic link (inside or outside the landing folder) or
    not a regular file; None for a regular file."""
    try:
        mode = os.lstat(path).st_mode
    except OSError as exc:
        return f"unreadable file: {exc.strerror or exc}"
    if stat.S_ISLNK(mode):
        target = os.path.realpath(path)
        if not _inside(target, root):
            return "symbolic link to outside the landing folder: not read"
        shown = os.path.relpath(target, root)
        return (
            f"symbolic link (to {shown}, inside the landing folder): links are not followed, "
            "land the file itself"
        )
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        return "not a regular file (a pipe, socket or device): not read"
    return None


def _not_read(path: Path, dataset: str, reason: str) -> LandingFile:
    """A file-level reject whose bytes are never opened (its key is made from its path)."""
    return LandingFile(path=path, dataset=dataset, problem=reason, misplaced=True, not_read=True)


def scan_landing(root: Path) -> Landing:
    """Every file under the dataset folders of `root`, in a stable order; nothing hashed yet.
    A dataset folder, subfolder or file that is a symbolic link, or a file that is not a
    regular file, is a reject naming the reason (README "Landing contract")."""
    landing = Landing(root=root)
    for entry in sorted(root.iterdir()):
        if _hidden(entry.name):
            landing.ignored.append(str(entry))
            continue
        if entry.is_symlink() and entry.is_dir():
            reason = not_readable_reason(entry, root) or "symbolic link"
            landing.files.append(_not_read(entry, entry.name, "dataset folder is a " + reason))
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
            reason = not_readable_reason(path, root)
            if reason is not None:
                landing.files.append(_not_read(path, entry.name, reason))
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


def _path_key(kind: str, f: LandingFile) -> str:
    return f"{kind}:" + hashlib.sha256(str(f.path).encode()).hexdigest()


def _open_regular(path: Path, root: Path) -> int:
    """Open a landing file for reading, refusing what the scan would have refused had it been
    there then: a link in its place, a file that is not regular, or a path that now leads out
    of the landing folder (a folder on the way replaced by a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        opened = f"/proc/self/fd/{fd}"
        real = os.readlink(opened) if os.path.exists(opened) else os.path.realpath(path)
        if not _inside(real, root):
            raise OSError("its path leads outside the landing folder")
    except BaseException:
        os.close(fd)
        raise
    return fd


def hash_file(f: LandingFile, root: Path, copies: Path | None = None) -> None:
    """sha256 of the bytes (the ledger key). An unreadable file gets a key from its path, a
    link or special file one from its path too, unread. With `copies`, the bytes hashed are
    also written to `copies/<hash><suffix>` (f.copy), the file Spark then reads."""
    if f.not_read:
        f.content_hash = _path_key("not-read", f)
        return
    digest = hashlib.sha256()
    f.size = 0
    partial: Path | None = None
    out = None
    try:
        with os.fdopen(_open_regular(f.path, root), "rb") as fh:
            if copies is not None:
                copies.mkdir(parents=True, exist_ok=True)
                partial = copies / f".{uuid.uuid4().hex}.partial"
                out = open(partial, "xb")  # noqa: SIM115 - closed below, also on errors
            while chunk := fh.read(HASH_CHUNK):
                digest.update(chunk)
                f.size += len(chunk)
                if out is not None:
                    out.write(chunk)
    except OSError as exc:
        if out is not None:
            out.close()
        if partial is not None:
            partial.unlink(missing_ok=True)
        f.problem = f"unreadable file: {exc.strerror or exc}"
        f.content_hash = _path_key("unreadable", f)
        return
    f.content_hash = digest.hexdigest()
    if out is not None and partial is not None:
        out.close()
        suffix = next((s for s in FORMATS if f.path.name.endswith(s)), "")
        f.copy = partial.with_name(f.content_hash + suffix)
        partial.replace(f.copy)  # the same content landed twice: one copy


def read_csv_header(f: LandingFile, dataset: Dataset) -> None:
    """Read the header row; a header without the required columns rejects the file."""
    try:
        with open(f.copy or f.path, "rb") as fh:
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
    f.open_last_line = _ends_without_newline(f.copy or f.path)


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


def prepare(
    landing: Landing,
    copies: Path,
    done: set[str],
    loaded: set[tuple[str, int]],
    progress: Callable[[LandingFile], None] | None = None,
) -> None:
    """Hash every file, copying into `copies` each one that may be loaded, and read the header
    of every CSV copy that is otherwise fine.

    `done`: the ledger's keys; `loaded`: the (path, size) of the files in the ledger. A file
    with the path and size of a loaded one is most likely that file again, so it is only
    hashed (a re-run over the same landing folder copies nothing); if its hash is new after
    all, it is read again into a copy, and that copy's hash is its key.
    """
    for f in landing.files:
        try:
            known = (f.source, os.lstat(f.path).st_size) in loaded
        except OSError:
            known = False
        to_copy = f.problem is None and not f.not_read
        hash_file(f, landing.root, copies if to_copy and not known else None)
        if f.problem is None and f.copy is None and to_copy and f.content_hash not in done:
            hash_file(f, landing.root, copies)
        if f.problem is None and f.copy is not None and f.fmt == "csv":
            read_csv_header(f, DATASETS[f.dataset])
        if progress is not None:
            progress(f)
