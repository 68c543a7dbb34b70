"""The trace file: block requests an application issued, as Parquet (docs/traces.md).

One row per request, in issue order. Captures and every import format write this schema, and
replay, `trace show` and `learn` read only this schema, so a new source is a new writer and
nothing else. Files are written in row groups as they come (bounded memory however long the
capture or the imported file) and read back batch by batch.

Columns (times in ns from the trace's first issue; sizes and offsets in bytes):

- `issue_ns`     when the request was issued to the device (blktrace's D, a format's timestamp)
- `complete_ns`  when it completed; null when the source does not say
- `latency_ns`   complete_ns - issue_ns (or the source's response time); null when unknown
- `op`           "read" | "write" | "flush" | "discard"
- `offset`       byte offset on the device (0 for a flush)
- `size`         bytes (0 for a flush without data)
- `sync`, `fua`, `preflush`, `meta`   the request's flags, false when the source does not say
- `pid`, `comm`  the process the kernel charged it to; null when unknown
- `device`       which device of the source ("8:16", an MSR disk number, an Alibaba device id)
- `queue_ns`     when the request was queued (its first bio submitted: blktrace's Q), before
                 issue_ns by the time it waited in a plug, a scheduler or for a tag; null when
                 the source does not say (imports, captures before the column existed). Added
                 after schema version 1 was published, without a version change: readers
                 that do not know it ignore it, and readers here treat a file without it as
                 all nulls.

The file's key-value metadata `tilemark.trace` holds a JSON document (TraceMeta): the schema
version, where the trace came from, the device, its size when known, the absolute start time,
events the kernel dropped while capturing, the command traced, host and kernel.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tilemark.errors import UsageError

TRACE_SCHEMA_VERSION = 1
META_KEY = b"tilemark.trace"
OPS = ("read", "write", "flush", "discard")
FLAGS = ("sync", "fua", "preflush", "meta")
# Rows per row group: large enough for fast scans, small enough to write as a capture goes.
ROW_GROUP_ROWS = 128 * 1024

TRACE_SCHEMA = pa.schema(
    [
        ("issue_ns", pa.int64()),
        ("complete_ns", pa.int64()),
        ("latency_ns", pa.int64()),
        ("op", pa.dictionary(pa.int8(), pa.string())),
        ("offset", pa.int64()),
        ("size", pa.int64()),
        ("sync", pa.bool_()),
        ("fua", pa.bool_()),
        ("preflush", pa.bool_()),
        ("meta", pa.bool_()),
        ("pid", pa.int32()),
        ("comm", pa.string()),
        ("device", pa.string()),
        ("queue_ns", pa.int64()),
    ]
)
COLUMNS = tuple(TRACE_SCHEMA.names)
REQUIRED = ("issue_ns", "op", "offset", "size")


class TraceError(UsageError):
    """A trace that cannot be read or written as asked: one sentence naming the file."""


@dataclass
class TraceMeta:
    """What a trace file says about itself (the `tilemark.trace` metadata)."""

    source: str  # "capture", "import:blkparse", "import:msr", ..., "synthetic"
    schema_version: int = TRACE_SCHEMA_VERSION
    device: str | None = None  # the traced device ("/dev/loop3", "msr:web_2")
    device_size: int | None = None  # bytes, when the source knows it
    start_epoch_ns: int | None = None  # absolute time of issue_ns == 0, when known
    events_lost: int = 0  # events the kernel dropped while capturing (never silently)
    command: list[str] | None = None  # what was traced (`-- CMD ARGS`)
    source_file: str | None = None  # the imported file
    host: str | None = None
    kernel: str | None = None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes, path: Path) -> TraceMeta:
        try:
            doc = json.loads(text)
            if not isinstance(doc, dict):
                raise ValueError("not an object")
            known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
            meta = cls(**known)
        except (ValueError, TypeError) as e:
            raise TraceError(f"trace {path} has damaged metadata ({e}).") from None
        if not isinstance(meta.schema_version, int) or meta.schema_version > TRACE_SCHEMA_VERSION:
            raise TraceError(
                f"trace {path} has schema version {meta.schema_version}; this tilemark reads "
                f"up to {TRACE_SCHEMA_VERSION} (a newer tilemark wrote it)."
            )
        return meta


def _column(name: str, values: list[Any] | Any, n: int) -> pa.Array:
    kind = TRACE_SCHEMA.field(name).type
    if values is None:
        if name in FLAGS:
            return pa.array([False] * n, pa.bool_())
        return pa.nulls(n, kind)
    if isinstance(values, pa.Array | pa.ChunkedArray):
        return values.cast(kind) if values.type != kind else values
    if name == "op":
        return pa.array(values, pa.string()).dictionary_encode().cast(kind)
    return pa.array(values, kind)


def batch(columns: dict[str, Any]) -> pa.RecordBatch:
    """A record batch of the trace schema from column lists or arrays (missing columns are
    null, missing flags false). ValueError when lengths differ or an op is not one of OPS."""
    lengths = {len(v) for k, v in columns.items() if v is not None}
    if len(lengths) > 1:
        raise ValueError(f"trace columns differ in length: {sorted(lengths)}")
    n = lengths.pop() if lengths else 0
    unknown = set(columns) - set(COLUMNS)
    if unknown:
        raise ValueError(f"not trace columns: {sorted(unknown)}")
    arrays = [_column(name, columns.get(name), n) for name in COLUMNS]
    return pa.RecordBatch.from_arrays(arrays, schema=TRACE_SCHEMA)


class TraceWriter:
    """Writes a trace file as rows come: `with TraceWriter(path, meta) as w: w.write(batch)`.

    Rows are buffered up to ROW_GROUP_ROWS and written as a row group, so memory stays bounded.
    The file appears under its name only when the writer closes without an error (written to
    a temporary file beside it, then renamed); on an error nothing is left behind. The
    metadata may be updated until close (a capture learns `events_lost` at its end)."""

    def __init__(self, path: str | os.PathLike[str], meta: TraceMeta):
        self.path = Path(path)
        self.meta = meta
        self.rows = 0
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._tmp = self.path  # set by __enter__
        self._file: Any = None
        self._writer: pq.ParquetWriter | None = None

    def __enter__(self) -> TraceWriter:
        # The temporary file is created exclusively (never a link planted in advance) and
        # written through its descriptor: the rename then replaces only a directory entry.
        fd, tmp = tempfile.mkstemp(
            dir=self.path.parent, prefix=f".{self.path.name}.", suffix=".tmp"
        )
        self._tmp = Path(tmp)
        mask = os.umask(0)
        os.umask(mask)
        os.fchmod(fd, 0o666 & ~mask)  # what a new file gets, not mkstemp's 0600
        self._file = os.fdopen(fd, "wb")
        self._writer = pq.ParquetWriter(self._file, TRACE_SCHEMA, compression="zstd")
        return self

    def write(self, rows: pa.RecordBatch | dict[str, Any]) -> None:
        b = rows if isinstance(rows, pa.RecordBatch) else batch(rows)
        if b.num_rows == 0:
            return
        self._pending.append(b)
        self._pending_rows += b.num_rows
        self.rows += b.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending and self._writer is not None:
            self._writer.write_table(pa.Table.from_batches(self._pending, TRACE_SCHEMA))
        self._pending, self._pending_rows = [], 0

    def __exit__(self, exc_type: object, *rest: object) -> None:
        writer = self._writer
        if writer is None:
            return
        try:
            if exc_type is None:
                self._flush()
                writer.add_key_value_metadata({META_KEY: self.meta.to_json().encode()})
            writer.close()
            self._file.close()
            self._writer = None
            if exc_type is None:
                os.replace(self._tmp, self.path)
        finally:
            if self._tmp.exists():
                self._tmp.unlink()


@dataclass
class Trace:
    """An open trace file: its metadata and row count; `batches()` reads it in order."""

    path: Path
    meta: TraceMeta
    rows: int
    _file: pq.ParquetFile

    def batches(self, columns: list[str] | None = None, batch_rows: int = 65536):
        """Record batches in issue order (only `columns` when given), at most `batch_rows`
        rows each. Read one row group at a time: pyarrow's iter_batches reads ahead, and its
        memory grew with the file (a 24M-row trace: 350 MB against 150 MB)."""
        for group in range(self._file.num_row_groups):
            table = self._file.read_row_group(group, columns=columns)
            yield from table.to_batches(max_chunksize=batch_rows)

    def table(self, columns: list[str] | None = None) -> pa.Table:
        """The whole trace (or some columns) in memory; for traces that fit."""
        return self._file.read(columns=columns)


def open_trace(path: str | os.PathLike[str]) -> Trace:
    """A trace file opened for reading, or a TraceError saying in one sentence why not."""
    path = Path(path)
    try:
        f = pq.ParquetFile(path)
    except FileNotFoundError:
        raise TraceError(f"trace {path} does not exist.") from None
    except IsADirectoryError:
        raise TraceError(f"trace {path} is a directory, not a trace file.") from None
    except OSError as e:
        raise TraceError(f"trace {path} cannot be read: {e.strerror or e}.") from None
    except (pa.ArrowInvalid, ValueError):
        raise TraceError(f"trace {path} is not a tilemark trace (not a Parquet file).") from None
    raw = (f.metadata.metadata or {}).get(META_KEY)
    if raw is None:
        raise TraceError(
            f"trace {path} is a Parquet file but not a tilemark trace (no {META_KEY.decode()} "
            "metadata); import other formats with `tilemark trace import`."
        )
    missing = [c for c in REQUIRED if c not in f.schema_arrow.names]
    if missing:
        raise TraceError(f"trace {path} lacks the column(s) {', '.join(missing)}.")
    meta = TraceMeta.from_json(raw, path)
    return Trace(path=path, meta=meta, rows=f.metadata.num_rows, _file=f)


def iter_rows(trace: Trace, columns: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """Rows as dicts (slow: for tests and small traces)."""
    for b in trace.batches(columns):
        yield from b.to_pylist()
