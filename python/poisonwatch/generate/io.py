"""Output side of `poisonwatch generate`: time formats, GUIDs and chunked, byte-stable writers.

Every writer produces the same bytes for the same calls: no wall clock (gzip mtime 0, no file
name in the gzip header), fixed parquet settings, `\\n` line ends.
"""

from __future__ import annotations

import csv
import gzip
import time
from pathlib import Path
from typing import IO, Any

import pyarrow as pa
import pyarrow.parquet as pq

from poisonwatch.warehouse.schemas import BIGINT, BOOLEAN, DATASETS, DOUBLE, INT, TIMESTAMP

# 2026-03-01T00:00:00Z in microseconds: the start of every generated workload.
T0_US = 1_772_323_200 * 1_000_000

_last_sec = -1
_last_base = ""


def _base(sec: int) -> str:
    global _last_sec, _last_base
    if sec != _last_sec:
        _last_sec = sec
        _last_base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
    return _last_base


def dotnet_time(us: int, offset_style: bool) -> str:
    """A .NET round-trip time: 7 fraction digits (100 ns ticks), `Z` or `+00:00`.

    The 7th digit is a deterministic sub-microsecond tick; times are ≥ 2 µs apart, so truncating
    or rounding to microseconds keeps their order.
    """
    sec, frac = divmod(us, 1_000_000)
    tick = (us >> 3) % 10
    return f"{_base(sec)}.{frac:06d}{tick}{'+00:00' if offset_style else 'Z'}"


def java_instant(us: int) -> str:
    """Java's `Instant.toString()`: fraction in groups of 3 digits, omitted when zero."""
    sec, frac = divmod(us, 1_000_000)
    sub = 0 if us & 3 == 0 else (us * 2_654_435_761 >> 7) % 1000
    nanos = frac * 1000 + sub
    if nanos == 0:
        return f"{_base(sec)}Z"
    if nanos % 1_000_000 == 0:
        return f"{_base(sec)}.{nanos // 1_000_000:03d}Z"
    if nanos % 1000 == 0:
        return f"{_base(sec)}.{nanos // 1000:06d}Z"
    return f"{_base(sec)}.{nanos:09d}Z"


def guid(bits: int, upper: bool = True) -> str:
    """A GUID from 128 random bits, formatted as a version-4 UUID."""
    bits = (bits & ~(0xF000 << 64) | (0x4000 << 64)) & ~(0xC << 60) | (0x8 << 60)
    h = f"{bits:032x}"
    s = f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
    return s.upper() if upper else s


class ChunkedLines:
    """Writes text lines to `part-NNNNN.jsonl` files of at most `chunk_records` lines each.

    Chunks whose index is in `gz_chunks` are written as `.jsonl.gz` instead.
    """

    def __init__(self, folder: Path, chunk_records: int, gz_chunks: frozenset[int] = frozenset()):
        self.folder = folder
        self.chunk_records = chunk_records
        self.gz_chunks = gz_chunks
        self.records = 0
        self.files: list[tuple[Path, int]] = []
        self._buf: list[str] = []
        self._in_chunk = 0
        self._fh: IO[bytes] | None = None
        self._raw: IO[bytes] | None = None
        folder.mkdir(parents=True, exist_ok=True)

    def _open(self) -> None:
        index = len(self.files)
        if index in self.gz_chunks:
            path = self.folder / f"part-{index:05d}.jsonl.gz"
            self._raw = open(path, "wb")  # noqa: SIM115
            self._fh = gzip.GzipFile(
                filename="", mode="wb", fileobj=self._raw, compresslevel=1, mtime=0
            )
        else:
            path = self.folder / f"part-{index:05d}.jsonl"
            self._raw = None
            self._fh = open(path, "wb")  # noqa: SIM115
        self.files.append((path, 0))
        self._in_chunk = 0

    def _flush(self) -> None:
        if self._buf:
            assert self._fh is not None
            self._fh.write("".join(self._buf).encode("utf-8"))
            self._buf.clear()

    def _close_chunk(self) -> None:
        self._flush()
        if self._fh is not None:
            self._fh.close()
            if self._raw is not None:
                self._raw.close()
            path, _ = self.files[-1]
            self.files[-1] = (path, self._in_chunk)
        self._fh = None

    def write(self, line: str) -> None:
        if self._fh is None:
            self._open()
        self._buf.append(line)
        self._in_chunk += 1
        self.records += 1
        if len(self._buf) >= 4096:
            self._flush()
        if self._in_chunk >= self.chunk_records:
            self._close_chunk()

    def close(self) -> list[tuple[Path, int]]:
        self._close_chunk()
        return self.files


def _csv_cell(value: Any) -> Any:
    if value is None:
        return ""
    if value is True:
        return "true"
    if value is False:
        return "false"
    return value


class ChunkedCsv:
    """Rows (tuples in the dataset's column order) streamed to `part-NNNNN.csv` files, each with
    a header and at most `chunk_records` rows."""

    def __init__(self, folder: Path, dataset: str, chunk_records: int):
        self.folder = folder
        self.columns = DATASETS[dataset].column_names
        self.chunk_records = chunk_records
        self.records = 0
        self.files: list[tuple[Path, int]] = []
        self._fh: IO[str] | None = None
        self._writer: Any = None
        self._in_chunk = 0
        folder.mkdir(parents=True, exist_ok=True)

    def _open(self) -> None:
        path = self.folder / f"part-{len(self.files):05d}.csv"
        self._fh = open(path, "w", encoding="utf-8", newline="")  # noqa: SIM115
        self._writer = csv.writer(self._fh, lineterminator="\n")
        self._writer.writerow(self.columns)
        self.files.append((path, 0))
        self._in_chunk = 0

    def _close_chunk(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self.files[-1] = (self.files[-1][0], self._in_chunk)
            self._fh = None

    def write(self, row: tuple[Any, ...]) -> None:
        if self._fh is None:
            self._open()
        self._writer.writerow([_csv_cell(v) for v in row])
        self._in_chunk += 1
        self.records += 1
        if self._in_chunk >= self.chunk_records:
            self._close_chunk()

    def close(self) -> list[tuple[Path, int]]:
        if not self.files:
            self._open()
        self._close_chunk()
        return self.files


_ARROW_TYPES = {
    TIMESTAMP: pa.timestamp("us", tz="UTC"),
    BIGINT: pa.int64(),
    INT: pa.int32(),
    BOOLEAN: pa.bool_(),
    DOUBLE: pa.float64(),
}


def arrow_schema(dataset: str) -> pa.Schema:
    """The parquet schema of a dataset: contract types, timestamps as UTC microseconds."""
    return pa.schema(
        [pa.field(c.name, _ARROW_TYPES.get(c.type, pa.string())) for c in DATASETS[dataset].columns]
    )


ROW_GROUP = 100_000


class ChunkedParquet:
    """Rows to `part-NNNNN.parquet` (row groups of ≤ 100,000, files of ≤ `chunk_records` rows);
    timestamp cells are integer microseconds since the epoch."""

    def __init__(self, folder: Path, dataset: str, chunk_records: int):
        self.folder = folder
        self.schema = arrow_schema(dataset)
        self.chunk_records = chunk_records
        self.records = 0
        self.files: list[tuple[Path, int]] = []
        self._rows: list[tuple[Any, ...]] = []
        self._writer: pq.ParquetWriter | None = None
        self._in_chunk = 0
        folder.mkdir(parents=True, exist_ok=True)

    def write(self, row: tuple[Any, ...]) -> None:
        self._rows.append(row)
        self.records += 1
        if len(self._rows) >= ROW_GROUP or self._in_chunk + len(self._rows) >= self.chunk_records:
            self._write_group()

    def _write_group(self) -> None:
        if self._writer is None:
            path = self.folder / f"part-{len(self.files):05d}.parquet"
            self._writer = pq.ParquetWriter(
                path, self.schema, compression="snappy", use_dictionary=True, version="2.6"
            )
            self.files.append((path, 0))
            self._in_chunk = 0
        arrays = []
        for i, field in enumerate(self.schema):
            values = [r[i] for r in self._rows]
            if pa.types.is_timestamp(field.type):
                arrays.append(pa.array(values, type=pa.int64()).cast(field.type))
            else:
                arrays.append(pa.array(values, type=field.type))
        self._writer.write_table(pa.Table.from_arrays(arrays, schema=self.schema))
        self._in_chunk += len(self._rows)
        self._rows = []
        if self._in_chunk >= self.chunk_records:
            self._close_chunk()

    def _close_chunk(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self.files[-1] = (self.files[-1][0], self._in_chunk)
            self._writer = None

    def close(self) -> list[tuple[Path, int]]:
        if self._rows or not self.files:
            self._write_group()
        self._close_chunk()
        return self.files
