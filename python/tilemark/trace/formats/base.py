"""What every import format shares: the raw batch it yields, the parse report, bad-row errors,
and a reader that cuts a text file into blocks of lines as Arrow strings (vectorised parsing).

A format's reader yields record batches of RAW_SCHEMA: the trace schema with times in the
source's own clock (ns since the Unix epoch when the format has absolute times, since the
trace's start otherwise) and one extra column, `_pos`, that says where the row came from
(its line, or its record number for the CSV formats; `Reader.line_of` turns it into a line).
The importer sorts, shifts times to the first issue and drops `_pos`.
"""

from __future__ import annotations

import io
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from tilemark.errors import UsageError
from tilemark.trace.schema import FLAGS, TRACE_SCHEMA, batch

POS = "_pos"
RAW_SCHEMA = TRACE_SCHEMA.append(pa.field(POS, pa.int64()))
# Text is read in blocks of this many bytes (bounded memory, large enough for vector speed).
BLOCK_BYTES = 8 << 20
# Rows per batch a parser yields.
BATCH_ROWS = 64 * 1024
SAMPLE_LINES = 32  # lines format detection looks at
MAX_LINE_BYTES = 1 << 20


def shown(text: str, limit: int = 40) -> str:
    """A value quoted for an error message, cut short (a bad row may be megabytes long)."""
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return repr(text)


class BadRow(UsageError):
    """A row the format does not allow: one sentence naming the file and line."""

    def __init__(self, display: str, line: int, what: str):
        self.line = line
        super().__init__(f"{display} line {line}: {what.rstrip('.')}.")


@dataclass
class ParseReport:
    """What a parser passed over (counts by reason, first line of each) and notes for the
    trace's metadata. Filled while parsing."""

    skipped: dict[str, list[int]] = field(default_factory=dict)  # reason -> [count, first line]
    notes: list[str] = field(default_factory=list)
    events_lost: int = 0
    extra: dict[str, Any] = field(default_factory=dict)

    def skip(self, reason: str, line: int, count: int = 1) -> None:
        """Count `count` rows passed over for `reason`, the first of them at `line`."""
        entry = self.skipped.get(reason)
        if entry is None:
            self.skipped[reason] = [count, line]
        else:
            entry[0] += count
            entry[1] = min(entry[1], line)

    def note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)


def raw_batch(columns: dict[str, Any], pos: Any) -> pa.RecordBatch:
    """A RAW_SCHEMA batch from trace columns (arrays or lists; missing columns null, missing
    flags false) and positions. Like schema.batch, without building Python lists."""
    pos_array = pos if isinstance(pos, pa.Array) else pa.array(pos, pa.int64())
    n = len(pos_array)
    arrays = []
    for f in TRACE_SCHEMA:
        values = columns.get(f.name)
        if values is None:
            arrays.append(pa.array(np.zeros(n, bool)) if f.name in FLAGS else pa.nulls(n, f.type))
        elif isinstance(values, pa.Array | pa.ChunkedArray):
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            if f.name == "op" and values.type != f.type:
                values = values.dictionary_encode().cast(f.type)
            arrays.append(values.cast(f.type) if values.type != f.type else values)
        else:
            arrays.append(batch({f.name: values}).column(f.name))
    return pa.RecordBatch.from_arrays([*arrays, pos_array], schema=RAW_SCHEMA)


class Reader(ABC):
    """One pass over one source file. Subclasses implement `batches`."""

    def __init__(self, path: Path, display: str):
        self.path = path
        self.display = display
        # Rows the importer can sort back into order; a reader that emits rows late (blkparse
        # waiting for completions) keeps them within this.
        self.window_rows = 128 * 1024
        self.report = ParseReport()
        self.text_bytes = 0  # read so far, after decompression (line_blocks counts them)

    @abstractmethod
    def batches(self) -> Iterator[pa.RecordBatch]:
        """The file's rows in trace-schema record batches, in order."""

    @property
    def bytes_read(self) -> int:
        """Bytes of text read so far (after decompression)."""
        return self.text_bytes

    def line_of(self, pos: int) -> int:
        """The file line of a row's `_pos` (line numbers are positions for text formats)."""
        return pos


def open_stream(path: Path) -> pa.NativeFile:
    """The file as a byte stream, decompressed when its name says so (.gz, .bz2, .zst, .lz4)."""
    return pa.input_stream(str(path), compression="detect")


class CountingStream(io.RawIOBase):
    """A byte stream that counts what was read from it (compressed streams cannot tell)."""

    def __init__(self, stream: pa.NativeFile):
        self.stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self.stream.read() if size is None or size < 0 else self.stream.read(size)
        self.count += len(data)
        return data

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        self.stream.close()
        super().close()


def _as_strings(data: bytes, display: str, first_line: int) -> pa.StringArray:
    """The lines of `data` (which ends with a newline) as Arrow strings, each with its
    newline; no copy. BadRow when the text is not UTF-8."""
    raw = np.frombuffer(data, np.uint8)
    ends = np.flatnonzero(raw == 10)
    offsets = np.empty(len(ends) + 1, np.int32)
    offsets[0] = 0
    offsets[1:] = ends + 1
    lines = pa.StringArray.from_buffers(len(ends), pa.py_buffer(offsets), pa.py_buffer(data))
    try:
        lines.validate(full=True)
    except pa.ArrowInvalid:
        for i, line in enumerate(data.split(b"\n")):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                raise BadRow(display, first_line + i, "is not UTF-8 text") from None
        raise
    return lines


def line_blocks(reader: Reader) -> Iterator[tuple[int, pa.StringArray]]:
    """(number of the first line, lines) for each block of the file; lines keep their
    newline. Counts the bytes read on `reader.text_bytes`."""
    first_line = 1
    carry = b""
    with open_stream(reader.path) as stream:
        while True:
            chunk = stream.read(BLOCK_BYTES)
            reader.text_bytes += len(chunk)
            if not chunk:
                break
            data = carry + chunk
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                if len(data) > MAX_LINE_BYTES:  # memory stays bounded on a file of no lines
                    too_long = f"is longer than {MAX_LINE_BYTES >> 20} MiB (not a text trace?)"
                    raise BadRow(reader.display, first_line, too_long)
                carry = data
                continue
            carry = data[cut:]
            lines = _as_strings(data[:cut], reader.display, first_line)
            yield first_line, lines
            first_line += len(lines)
    if carry:
        if len(carry) > MAX_LINE_BYTES:
            too_long = f"is longer than {MAX_LINE_BYTES >> 20} MiB (not a text trace?)"
            raise BadRow(reader.display, first_line, too_long)
        lines = _as_strings(carry + b"\n", reader.display, first_line)
        yield first_line, lines


def sample_lines(path: Path, limit: int = SAMPLE_LINES) -> list[str]:
    """The first `limit` non-blank lines of a file (for format detection); undecodable bytes
    are replaced, so a binary file yields lines no format accepts."""
    out: list[str] = []
    want = 256 * 1024
    with open_stream(path) as stream:
        data = stream.read(want)
    parts = data.split(b"\n")
    if len(data) == want:
        parts = parts[:-1]  # the last line may be cut
    for raw in parts:
        text = raw.decode("utf-8", errors="replace").rstrip("\r")
        if text.strip():
            out.append(text)
            if len(out) >= limit:
                break
    return out
