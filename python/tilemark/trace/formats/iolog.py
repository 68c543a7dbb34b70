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

from tilemark.trace.formats.base import BadRow, Reader, line_blocks, raw_batch

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
        texts = pc.utf8_trim_whitespace(lines)
        tokens = pc.utf8_split_whitespace(texts)
        counts = pc.list_value_length(tokens).to_numpy(zero_copy_only=False)
        blank = pc.equal(texts, "").to_numpy(zero_copy_only=False)
        fields = pc.list_slice(tokens, 0, 5, return_fixed_size_list=True)
        f = [pc.list_element(fields, k) for k in range(5)]
        base = 1 if v3 else 0
        name, action = f[base], f[base + 1]
        is_io = pc.is_in(action, pa.array(list(IO_ACTIONS) + ["wait"])).to_numpy(
            zero_copy_only=False
        )
        is_file = pc.is_in(action, pa.array(FILE_ACTIONS)).to_numpy(zero_copy_only=False)
        io_fields, file_fields = (5, 3) if v3 else (4, 2)
        ok = blank | (is_io & (counts == io_fields)) | (is_file & (counts == file_fields))
        for column in (f[base + 2], f[base + 3]):
            digits = pc.fill_null(pc.match_substring_regex(column, _DIGITS), True)
            ok &= digits.to_numpy(zero_copy_only=False) | blank | is_file
        if v3:
            ok &= (
                pc.fill_null(pc.match_substring_regex(f[0], _DIGITS), False).to_numpy(
                    zero_copy_only=False
                )
                | blank
            )
        if not ok.all():
            bad = int(np.flatnonzero(~ok)[0])
            raise BadRow(self.display, first_line + bad, self._why(texts[bad].as_py()))
        lines_no = np.arange(first_line, first_line + len(lines), dtype=np.int64)
        files = int(is_file.sum())
        if files:
            first_file = int(lines_no[is_file][0])
            self.report.skip("fio file actions (add, open, close)", first_file, files)
        keep = is_io & ~blank
        if v3:
            waits = keep & pc.equal(action, "wait").to_numpy(zero_copy_only=False)
            if waits.any():
                # fio ignores wait lines in version 3 (timestamps replace them).
                self.report.skip(
                    "fio v3 wait lines (fio ignores them)",
                    int(lines_no[waits][0]),
                    int(waits.sum()),
                )
                keep &= ~waits
        index = pa.array(np.flatnonzero(keep))
        act = pc.take(action, index)
        offset = pc.cast(pc.take(f[base + 2], index), pa.int64())
        length = pc.cast(pc.take(f[base + 3], index), pa.int64())
        if v3:
            issue = pc.multiply_checked(pc.cast(pc.take(f[0], index), pa.int64()), 1000)
        else:
            issue, keep_io = self._v2_times(act, offset)
            act, offset, length, index = (
                pc.filter(x, keep_io) for x in (act, offset, length, index)
            )
        op = pc.take(
            pa.array(["read", "write", "discard", "flush", "flush"]),
            pc.index_in(act, pa.array(["read", "write", "trim", "sync", "datasync"])),
        )
        flush = pc.equal(op, "flush")
        if pc.any(flush).as_py():
            self.report.note(SYNC_NOTE)
            offset = pc.if_else(flush, 0, offset)
            length = pc.if_else(flush, 0, length)
        device = pc.take(name, index)
        out = raw_batch(
            {"issue_ns": issue, "op": op, "offset": offset, "size": length, "device": device},
            pc.take(pa.array(lines_no), index),
        )
        return out

    def _v2_times(self, act: pa.Array, value: pa.Array) -> tuple[pa.Array, pa.Array]:
        """Issue times of v2 rows (ns) and which rows are requests (waits are not)."""
        is_wait = pc.equal(act, "wait").to_numpy(zero_copy_only=False)
        waits = np.where(is_wait, value.to_numpy(zero_copy_only=False), -1)
        # The time in force at a row: the largest wait so far (fio waits until then).
        clock = np.maximum.accumulate(np.concatenate([[self.clock_ms], waits]))
        self.clock_ms = int(clock[-1])
        before = clock[:-1]  # the clock when each row is read
        issue = pa.array(np.multiply(before, 1_000_000, dtype=np.int64))
        requests = pa.array(~is_wait)
        return pc.filter(issue, requests), requests

    def _why(self, text: str) -> str:
        fields = text.split()
        v3 = self.version == 3
        if v3 and not fields[0].isdigit():
            return f"starts with {fields[0]!r}, not a timestamp (fio iolog v3 lines start with one)"
        action = fields[2 if v3 else 1] if len(fields) > (2 if v3 else 1) else ""
        if action in FILE_ACTIONS:
            return f"the file action {action!r} takes no offset or length"
        if action not in IO_ACTIONS and action != "wait":
            known = ", ".join([*IO_ACTIONS, "wait", *FILE_ACTIONS])
            return f"{action or text!r} is not a fio iolog action ({known})"
        want = 5 if v3 else 4
        if len(fields) != want:
            return f"the action {action!r} needs an offset and a length"
        return f"the offset and length of {action!r} must be whole numbers >= 0"
