"""fio's iolog, versions 2 and 3 (what `write_iolog` writes and `read_iolog` replays).

Source: fio's HOWTO ("Trace file format v2", "Trace file format v3") and iolog.c, which
writes and reads them (github.com/axboe/fio). The first line names the version:

    fio version 2 iolog                    fio version 3 iolog
    /dev/sdb add                           0 /dev/sdb add
    /dev/sdb open                          12 /dev/sdb open
    /dev/sdb write 4096 4096               1043 /dev/sdb write 4096 4096
    /dev/sdb wait 5 0                      2175 /dev/sdb read 0 8192
    /dev/sdb read 0 8192                   3001 /dev/sdb close
    /dev/sdb close

File actions (add, open, close) name the file; IO actions are read, write, trim (a discard),
sync and datasync (a flush here), each with an offset and a length in bytes.

Times. Version 3 starts each line with a timestamp: fio writes microseconds since the job
started (`utime_since_now` in log_io_u) and replays them as microsecond delays. Version 2 has
no times: requests between `wait` lines are issued back to back. The HOWTO calls the wait's
value microseconds relative to the previous wait, but fio's reader waits until that many
*milliseconds since the job started* (iolog.c: `ipo->delay > mtime_since_genesis()`), as its
maintainers explain in axboe/fio#247 and #756; tilemark follows the code: a v2 request is at
the largest wait before it (ms since the start), 0 before any wait. The device is the file
name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.base import BadRow, Reader, line_blocks, raw_batch, shown
from tilemark.trace.schema import OPS

NAME = "iolog"
TITLE = "fio iolog v2/v3"
EXAMPLE = "fio version 3 iolog\n1043 /dev/sdb write 4096 4096"
ABSOLUTE_TIME = False
HEADERS = {"fio version 2 iolog": 2, "fio version 3 iolog": 3}
IO_ACTIONS = {
    "read": "read",
    "write": "write",
    "trim": "discard",
    "sync": "flush",
    "datasync": "flush",
}
FILE_ACTIONS = ("add", "open", "close")
VERSION_NOTES = {
    2: "fio iolog v2 has no times: each request is at the last `wait` before it (ms since "
    "the start, as fio's reader treats it), 0 before any wait.",
    3: "fio iolog v3 timestamps are microseconds since the job started.",
}
NOTES = ()
_ACTION_NAMES = ["read", "write", "trim", "sync", "datasync", "wait"]
_IO_ACTIONS = pa.array(_ACTION_NAMES)
_WAIT = _ACTION_NAMES.index("wait")
_OP_OF_ACTION = np.array(
    [OPS.index(o) for o in ("read", "write", "discard", "flush", "flush")] + [-1], np.int8
)
_OPS = pa.array(OPS, pa.string())
SYNC_NOTE = "fio sync and datasync lines (fsync/fdatasync of the file) became flushes."
_DIGITS = r"^[0-9]+$"


def detect(lines: list[str]) -> bool:
    """The first line is `fio version 2 iolog` or `fio version 3 iolog`."""
    return bool(lines) and lines[0].strip() in HEADERS


def reader(path: Path, display: str) -> IologReader:
    return IologReader(path, display)


class IologReader(Reader):
    """Parses blocks of lines column-wise; `_pos` is the line."""

    def batches(self) -> Iterator[pa.RecordBatch]:
        self.version = 0
        self.clock_ms = 0  # v2: the largest wait so far
        for first_line, lines in line_blocks(self):
            if not self.version:
                first_line, lines = self._header(first_line, lines)
                if lines is None:
                    continue
            out = self._block(first_line, lines)
            if out is not None and out.num_rows:
                yield out
        if not self.version:
            raise BadRow(self.display, 1, "is not a fio iolog (no `fio version N iolog` line)")

    def _header(self, first_line: int, lines: pa.StringArray) -> tuple[int, pa.StringArray | None]:
        texts = pc.utf8_trim_whitespace(lines)
        blank = pc.equal(texts, "")
        if pc.all(blank).as_py():
            return first_line, None
        i = pc.index(blank, False).as_py()
        header = texts[i].as_py()
        if header not in HEADERS:
            raise BadRow(
                self.display,
                first_line + i,
                "is not `fio version 2 iolog` or `fio version 3 iolog`",
            )
        self.version = HEADERS[header]
        self.report.note(VERSION_NOTES[self.version])
        self.report.extra["iolog_version"] = self.version
        return first_line + i + 1, lines.slice(i + 1)

    def _block(self, first_line: int, lines: pa.StringArray) -> pa.RecordBatch | None:
        if len(lines) == 0:
            return None
        v3 = self.version == 3
        base = 1 if v3 else 0  # v3 lines start with the timestamp
        io_fields, file_fields = (5, 3) if v3 else (4, 2)
        texts = pc.utf8_trim_whitespace(lines)
        tokens = pc.utf8_split_whitespace(texts)
        counts = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
        blank = pc.equal(texts, "").to_numpy(zero_copy_only=False)
        is_io = (counts == io_fields) & ~blank
        is_file = (counts == file_fields) & ~blank
        lines_no = np.arange(first_line, first_line + len(lines), dtype=np.int64)
        wrong = ~(is_io | is_file | blank)
        if wrong.any():
            self._bad(texts, lines_no, wrong)
        if is_file.any():
            self._file_actions(texts, tokens, lines_no, is_file, base)
        if not is_io.any():
            return None
        io = pc.filter(tokens, pa.array(is_io))
        rows = lines_no[is_io]
        f = [pc.list_element(io, k) for k in range(io_fields)]
        name = f[base]
        codes = pc.index_in(f[base + 1], _IO_ACTIONS)
        if codes.null_count:
            unknown = pc.is_null(codes).to_numpy(zero_copy_only=False)
            self._bad(pc.filter(texts, pa.array(is_io)), rows, unknown)
        code = codes.to_numpy(zero_copy_only=False)
        numbers = [f[base + 2], f[base + 3]] + ([f[0]] if v3 else [])
        offset, length, *stamp = (self._whole(c, texts, rows, is_io) for c in numbers)
        keep = np.ones(len(rows), bool)
        if v3:
            waits = code == _WAIT
            if waits.any():
                # fio ignores wait lines in version 3 (timestamps replace them).
                self.report.skip("fio v3 wait lines (fio ignores them)",
                                 int(rows[waits][0]), int(waits.sum()))  # fmt: skip
                keep &= ~waits
            issue = stamp[0] * 1000
        else:
            issue, keep = self._v2_times(code, offset)
        code, offset, length, issue, rows = (x[keep] for x in (code, offset, length, issue, rows))
        op = _OP_OF_ACTION[code]
        flush = op == OPS.index("flush")
        if flush.any():
            self.report.note(SYNC_NOTE)
            offset = np.where(flush, 0, offset)
            length = np.where(flush, 0, length)
        device = pc.filter(name, pa.array(keep)) if not keep.all() else name
        return raw_batch(
            {
                "issue_ns": pa.array(issue),
                "op": pa.DictionaryArray.from_arrays(pa.array(op), _OPS),
                "offset": pa.array(offset),
                "size": pa.array(length),
                "device": device,
            },
            pa.array(rows),
        )

    def _file_actions(self, texts, tokens, lines_no, is_file, base: int) -> None:
        files = pc.filter(tokens, pa.array(is_file))
        action = pc.list_element(files, base + 1)
        known = pc.is_in(action, pa.array(FILE_ACTIONS)).to_numpy(zero_copy_only=False)
        rows = lines_no[is_file]
        if not known.all():
            self._bad(pc.filter(texts, pa.array(is_file)), rows, ~known)
        if base:
            self._whole(pc.list_element(files, 0), texts, rows, is_file)
        self.report.skip("fio file actions (add, open, close)", int(rows[0]), len(rows))

    def _whole(self, column: pa.Array, texts, rows: np.ndarray, selected: np.ndarray):
        """A column of whole numbers >= 0 as int64 (BadRow naming the first line that is not)."""
        try:
            values = pc.cast(column, pa.int64()).to_numpy()
        except pa.ArrowInvalid:
            values = None
        if values is None or (len(values) and values.min() < 0):
            digits = pc.match_substring_regex(column, _DIGITS).to_numpy(zero_copy_only=False)
            self._bad(pc.filter(texts, pa.array(selected)), rows, ~digits)
        return values

    def _bad(self, texts: pa.Array, rows: np.ndarray, wrong: np.ndarray) -> None:
        i = int(np.flatnonzero(wrong)[0])
        raise BadRow(self.display, int(rows[i]), self._why(texts[i].as_py()))

    def _v2_times(self, code: np.ndarray, value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Issue times of v2 rows (ns) and which rows are requests (waits are not)."""
        is_wait = code == _WAIT
        waits = np.where(is_wait, value, -1)
        # The time in force at a row: the largest wait so far (fio waits until then).
        clock = np.maximum.accumulate(np.concatenate([[self.clock_ms], waits]))
        self.clock_ms = int(clock[-1])
        return clock[:-1] * 1_000_000, ~is_wait

    def _why(self, text: str) -> str:
        fields = text.split()
        v3 = self.version == 3
        if v3 and not fields[0].isdigit():
            first = shown(fields[0])
            return f"starts with {first}, not a timestamp (fio iolog v3 lines start with one)"
        action = fields[2 if v3 else 1] if len(fields) > (2 if v3 else 1) else ""
        if action in FILE_ACTIONS:
            return f"the file action {shown(action)} takes no offset or length"
        if action not in IO_ACTIONS and action != "wait":
            known = ", ".join([*IO_ACTIONS, "wait", *FILE_ACTIONS])
            return f"{shown(action or text)} is not a fio iolog action ({known})"
        want = 5 if v3 else 4
        if len(fields) != want:
            return f"the action {shown(action)} needs an offset and a length"
        return f"the offset and length of {shown(action)} must be whole numbers >= 0"
