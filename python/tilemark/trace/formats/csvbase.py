"""The published CSV traces (MSR Cambridge, Alibaba, Tencent CBS): one spec each, read by
pyarrow's streaming CSV reader (C++, in blocks, bounded memory) and converted column-wise.

Rows the reader rejects (a wrong field count, a number that is not one) are found again by a
plain line-by-line scan, which names the line; it only runs when the fast path fails.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.errors import UsageError
from tilemark.trace.formats.base import (
    MAX_LINE_BYTES,
    BadRow,
    CountingStream,
    Reader,
    open_stream,
    raw_batch,
    shown,
)

CSV_BLOCK_BYTES = 1 << 20  # a batch of ~20k rows; larger blocks only cost memory
INT = "int"  # a whole number >= 0
TEXT = "text"


@dataclass(frozen=True)
class Column:
    name: str
    kind: str | tuple[str, ...]  # INT, TEXT, or the values allowed
    meaning: str  # for error messages: "the offset in bytes"
    limit: int = (1 << 63) - 1  # the largest INT whose nanoseconds or bytes fit in 64 bits

    def arrow_type(self) -> pa.DataType:
        return pa.int64() if self.kind == INT else pa.dictionary(pa.int32(), pa.string())

    def check(self, text: str) -> str | None:
        """Why one field is not allowed, or None."""
        if self.kind == INT:
            if not text.isascii() or not text.isdigit():
                return (
                    f"{self.name} ({self.meaning}) must be a whole number >= 0, got {shown(text)}"
                )
            if int(text) > self.limit:
                return f"{self.name} ({self.meaning}) {text} is too large (at most {self.limit})"
        elif self.kind != TEXT and text not in self.kind:
            allowed = " or ".join(self.kind)
            return f"{self.name} must be {allowed}, got {shown(text)}"
        return None


@dataclass(frozen=True)
class CsvSpec:
    """A CSV trace format: its columns in order and how rows become trace columns."""

    name: str
    columns: tuple[Column, ...]
    # table (the columns by name, after checks) -> trace columns (times in ns, absolute)
    convert: Callable[[dict[str, pa.Array]], dict[str, Any]]
    aliases: tuple[tuple[str, ...], ...] = ()  # other spellings of the header seen in the wild

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    def is_header(self, line: str) -> bool:
        """The line is the documented column names (the published files have none, but
        copies often carry one)."""
        fields = tuple(f.strip().lower() for f in line.strip().split(","))
        known = (tuple(self.names), *self.aliases)
        return any(fields == tuple(n.lower() for n in names) for names in known)

    def check_line(self, line: str) -> str | None:
        """Why one data line is not a row of this format, or None."""
        fields = line.rstrip("\r\n").split(",")
        if len(fields) != len(self.columns):
            return (
                f"has {len(fields)} fields, {self.name} rows have {len(self.columns)} "
                f"({','.join(self.names)})"
            )
        for column, text in zip(self.columns, fields, strict=True):
            why = column.check(text)
            if why is not None:
                return why
        return None

    def detect(self, lines: list[str]) -> bool:
        """Every sampled line is a row (or the header, first)."""
        if lines and self.is_header(lines[0]):
            lines = lines[1:]
        return bool(lines) and all(self.check_line(line) is None for line in lines)


class CsvReader(Reader):
    """Streams one CSV trace: `_pos` is the record number (0 = the first data row)."""

    def __init__(self, spec: CsvSpec, path: Path, display: str):
        super().__init__(path, display)
        self.spec = spec
        self.header_lines = 0
        self._stream: CountingStream | None = None

    @property
    def bytes_read(self) -> int:
        """Bytes of text read so far (after decompression), as the stream counts them."""
        return self._stream.count if self._stream is not None else 0

    def _has_header(self) -> bool:
        with open_stream(self.path) as stream:
            first = stream.read(4096).split(b"\n", 1)[0]
        return self.spec.is_header(first.decode("utf-8", errors="replace"))

    def batches(self) -> Iterator[pa.RecordBatch]:
        import pyarrow.csv as pcsv

        self.header_lines = 1 if self._has_header() else 0
        spec = self.spec
        read = pcsv.ReadOptions(
            column_names=spec.names, skip_rows=self.header_lines, block_size=CSV_BLOCK_BYTES
        )
        convert = pcsv.ConvertOptions(
            column_types={c.name: c.arrow_type() for c in spec.columns},
            null_values=[],
            strings_can_be_null=False,
            quoted_strings_can_be_null=False,
        )
        parse = pcsv.ParseOptions(delimiter=",", quote_char=False)
        position = 0
        stream = self._stream = CountingStream(open_stream(self.path))
        try:
            try:
                csv = pcsv.open_csv(
                    stream, read_options=read, parse_options=parse, convert_options=convert
                )
                while True:
                    try:
                        table = csv.read_next_batch()
                    except StopIteration:
                        break
                    rows = table.num_rows
                    out = self._convert(table, position)
                    position += rows
                    if out is not None and out.num_rows:
                        yield out
            except pa.ArrowInvalid as e:
                self._locate_bad_line(str(e))
        finally:
            stream.close()

    def _convert(self, table: pa.RecordBatch, position: int) -> pa.RecordBatch | None:
        columns = {name: table.column(name) for name in self.spec.names}
        for column in self.spec.columns:
            if isinstance(column.kind, tuple):
                values = columns[column.name]
                ok = pc.is_in(values, pa.array(column.kind, pa.string()))
                if not pc.all(ok).as_py():
                    first = pc.index(ok, False).as_py()
                    self._bad(position + first, column.check(str(values[first].as_py())) or "")
        try:
            trace_columns = self.spec.convert(columns)
        except pa.ArrowInvalid as e:  # an overflow: a number too large for nanoseconds
            self._locate_bad_line(str(e))
        pos = pa.array(np.arange(position, position + table.num_rows, dtype=np.int64))
        return raw_batch(trace_columns, pos)

    def _bad(self, position: int, why: str) -> None:
        raise BadRow(self.display, self.line_of(position), why)

    def line_of(self, pos: int) -> int:
        """The line of record `pos`: blank lines are not records, so count them."""
        line_no = 0
        seen = -1
        with open_stream(self.path) as stream:
            for line_no, raw in enumerate(_lines(stream), start=1):
                if line_no <= self.header_lines or not raw.strip(b"\r\n"):
                    continue
                seen += 1
                if seen == pos:
                    return line_no
        return line_no

    def _locate_bad_line(self, arrow_message: str) -> None:
        """Raise BadRow for the first line the format does not allow (the reader said there
        is one); a UsageError with the reader's words when no line is at fault."""
        with open_stream(self.path) as stream:
            for line_no, raw in enumerate(_lines(stream), start=1):
                if line_no <= self.header_lines:
                    continue
                text = raw.decode("utf-8", errors="replace")
                if not text.strip("\r\n"):
                    continue
                why = self.spec.check_line(text)
                if why is not None:
                    raise BadRow(self.display, line_no, why)
        raise UsageError(
            f"{self.display} cannot be read as {self.spec.name}: {arrow_message.strip()}."
        )


def _lines(stream: pa.NativeFile) -> Iterator[bytes]:
    carry = b""
    while True:
        chunk = stream.read(1 << 20)
        if not chunk:
            break
        parts = (carry + chunk).split(b"\n")
        carry = parts.pop()
        yield from parts
        if len(carry) > MAX_LINE_BYTES:  # no end of line: bad anyway, and memory stays bounded
            yield carry
            carry = b""
    if carry:
        yield carry


def scaled(values: pa.Array, factor: int) -> pa.Array:
    """values x factor as int64; ArrowInvalid on overflow."""
    return pc.multiply_checked(values, pa.scalar(factor, pa.int64()))


def as_text(values: pa.Array) -> pa.Array:
    """A column as strings (ids become the device names)."""
    if pa.types.is_dictionary(values.type):
        values = values.cast(pa.string())
    return values.cast(pa.string())
