"""blkparse's default text output (blktrace's events of the Linux block layer).

Source: blktrace/blkparse (git.kernel.dk/blktrace, Jens Axboe), blkparse(1) and its
blkparse_fmt.c, which prints every event as

    %3d,%-3d %2d %8d %5d.%09lu %5u %2s %3s <action-specific>
    8,16     1        3     0.000012345  4162  D   W 1234567 + 8 [fio]

device major,minor; CPU; sequence; seconds.nanoseconds since the trace started; pid; action
(Q queued, G get request, I inserted, D issued to the driver, C completed, M/F merged, P/U
plug/unplug, X split, A remapped, m a message); RWBS; then for Q/D "sector + sectors
[process]" and for C "sector + sectors [error]" (sectors of 512 bytes). A request without
data (a flush) prints no sector on D and "sector [error]" on C. RWBS: an optional leading F
(preflush), then D discard, W write, R read or N none, then F (FUA), A (read-ahead), S (sync),
M (metadata). After the events blkparse prints a summary per CPU and device ("CPU0 (8,16):",
"Total (8,16):", "Throughput (R/W): ...", "Events (8,16): N entries", "Skips: ..."), skipped
here except for its count of events the kernel lost.

One trace row per request: issued at its D, completed at the C that matches it by device,
sector, size and direction (first issued, first completed; requests without data, flushes,
by device alone: the block layer has one flush of a queue in flight at a time), pid and
process from the Q of the same sector when there was one (the submitter; a D may be issued
by a kworker), else the D's. A C without a D (the request was issued before tracing started)
and a D without a C (the trace ended first, or events were lost) are counted and reported;
the latter keep a null completion. blkmatch.py does the pairing, column-wise.

The lines are parsed column-wise too (pyarrow compute over blocks of lines): which lines are
events, which are D, C or Q, and their numbers; only lines of uncommon shape go through
Python one by one.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.base import RAW_SCHEMA, BadRow, Reader, line_blocks, shown
from tilemark.trace.formats.blkmatch import Events, Matcher, Requests
from tilemark.trace.schema import OPS

NAME = "blkparse"
TITLE = "blkparse text (blktrace's default output)"
EXAMPLE = "  8,16   1        3     0.000012345  4162  D   W 1234567 + 8 [fio]"
ABSOLUTE_TIME = False
SECTOR = 512
# A request still waiting for its completion after this many newer issues is given up as
# "D without C" (its completion was lost): that bounds memory on a damaged trace, and keeps
# every row within the importer's reorder window (at most half of it).
MAX_IN_FLIGHT = 1 << 16

_HEADER = r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+"
EVENT_RE = _HEADER + r"\S+\s"  # any event line (its action checked apart)
_EVENT = re.compile(EVENT_RE)
# The events a request is made of (D, C, Q): with an RWBS and something after it.
_REQUEST_EVENT_RE = _HEADER + r"[DCQ]\s+\S+\s+\S"
# Events of other actions (blkparse_fmt.c), messages (m) among them.
_OTHER_EVENT_RE = _HEADER + r"(?:[ABFGIMPRSTUX]|UT|m)\s"
_MESSAGE_RE = _HEADER + r"m\s"
# The usual text after the RWBS of a D, C or Q: "sector + sectors [process-or-error]", with
# blkparse -t's "(elapsed)" before the bracket.
_COMMON_REST_RE = r"^\d+ \+ \d+ (?:\(\s*\d+\) )?\[.*\]$"
_RWBS = re.compile(r"^(F?)([RWDN])(F?)(A?)(S?)(M?)$")
_SUMMARY_START = re.compile(
    r"^(CPU\d+|Total) \(.*\):\s*$|^\s+Reads Queued:|^\S.*\(\d+(, \.\.\.)?\)\s*$"
)
_SKIPS = re.compile(r"^Skips: ([\d,']+) forward \(([\d,']+) -")
_INPUT = re.compile(r"^Input file .* added\s*$")
D, C, Q = 0, 1, 2
_OP_CODE = {"read": OPS.index("read"), "write": OPS.index("write"),
            "discard": OPS.index("discard"), None: -1}  # fmt: skip
FLUSH = OPS.index("flush")
_OPS = pa.array(OPS, pa.string())
_KINDS = pa.array(["D", "C", "Q"])


def detect(lines: list[str]) -> bool:
    """The sampled lines are blkparse events (or `Input file ... added`) up to the summary,
    and there is at least one event."""
    events = 0
    for line in lines:
        if not line.strip():
            continue
        if _EVENT.match(line + " "):
            events += 1
        elif _SUMMARY_START.match(line):
            break
        elif not _INPUT.match(line):
            return False
    return events > 0


def reader(path: Path, display: str) -> BlkparseReader:
    return BlkparseReader(path, display)


def _device_label(text: str) -> str:
    return text.replace(",", ":")


class _Rwbs:
    """What an RWBS string says: op, flags and the direction requests are matched by."""

    __slots__ = ("op", "preflush", "fua", "sync", "meta", "direction")

    def __init__(self, text: str):
        m = _RWBS.match(text)
        if m is None:
            raise ValueError(text)
        pre, main, fua, _ahead, sync, meta = m.groups()
        self.preflush, self.fua = bool(pre), bool(fua)
        self.sync, self.meta = bool(sync), bool(meta)
        self.direction = "RWDN".index(main)
        self.op = {"R": "read", "W": "write", "D": "discard", "N": None}[main]


class _Table:
    """Strings seen so far, each with a number (devices, processes, RWBS fields)."""

    def __init__(self, convert=lambda s: s):
        self.index: dict[str, int] = {}
        self.values: list[Any] = []
        self.convert = convert

    def codes(self, column: pa.Array) -> np.ndarray:
        """The number of each row's string (new strings are added)."""
        encoded = pc.dictionary_encode(column)
        mapping = np.array([self.add(s) for s in encoded.dictionary.to_pylist()], np.int64)
        indices = encoded.indices.to_numpy(zero_copy_only=False)
        return mapping[indices] if len(mapping) else indices.astype(np.int64)

    def add(self, text: str) -> int:
        i = self.index.get(text)
        if i is None:
            self.values.append(self.convert(text))
            i = self.index[text] = len(self.values) - 1
        return i


class BlkparseReader(Reader):
    """Column-wise over blocks of lines; `_pos` is the line of the request's D."""

    def __init__(self, path: Path, display: str):
        super().__init__(path, display)
        self._devices = _Table(_device_label)
        self._strings = _Table()
        self._rwbs = _Table(_Rwbs)
        self._ok = self._strings.add("0")  # the error of a completion without one
        self._in_summary = False
        self._ready: list[pa.RecordBatch] = []

    def batches(self) -> Iterator[pa.RecordBatch]:
        self._matcher = Matcher(min(MAX_IN_FLIGHT, max(1, self.window_rows // 2)))
        for first_line, lines in line_blocks(self):
            self._block(first_line, lines)
            yield from self._ready
            self._ready = []
        for requests in self._matcher.finish():
            self._rows(requests)
        yield from self._ready
        self._finish_report()

    # -- one block of lines ------------------------------------------------------------
    def _block(self, first_line: int, lines: pa.StringArray) -> None:
        requests = pc.match_substring_regex(lines, _REQUEST_EVENT_RE)
        requests_np = requests.to_numpy(zero_copy_only=False)
        if not requests_np.all():
            self._other_lines(first_line, lines, requests_np)
        if not requests_np.any():
            return
        rows = np.flatnonzero(requests_np)
        if len(rows) < len(lines):
            lines = pc.filter(lines, requests)
        fields = pc.utf8_split_whitespace(pc.utf8_trim_whitespace(lines), max_splits=7)
        f = [pc.list_element(fields, k) for k in range(8)]
        kind = pc.index_in(f[5], _KINDS).to_numpy(zero_copy_only=False)
        self._match(rows + first_line, kind, f)

    def _other_lines(self, first_line: int, lines: pa.StringArray, requests: np.ndarray) -> None:
        """Events of other actions and messages pass; blank lines, `Input file ... added` and
        the summary are allowed; nothing else."""
        rows = np.flatnonzero(~requests)
        others = pc.take(lines, pa.array(rows))
        fine = pc.match_substring_regex(others, _OTHER_EVENT_RE).to_numpy(zero_copy_only=False)
        messages = pc.match_substring_regex(others, _MESSAGE_RE).to_numpy(zero_copy_only=False)
        if messages.any():
            first = first_line + int(rows[np.flatnonzero(messages)[0]])
            self.report.skip("blkparse messages (action m)", first, int(messages.sum()))
        for i in np.flatnonzero(~fine).tolist():
            line = first_line + int(rows[i])
            text = others[i].as_py().rstrip("\r\n")
            if not text.strip() or _INPUT.match(text):
                continue
            if not self._in_summary and _SUMMARY_START.match(text):
                self._in_summary = True
            if self._in_summary:
                skips = _SKIPS.match(text)
                if skips:
                    self.report.events_lost += int(re.sub(r"[,']", "", skips.group(2)))
                self.report.skip("blkparse summary lines", line)
                continue
            if _EVENT.match(text + " "):
                words = text.split()
                if words[5] in ("D", "C", "Q"):
                    raise BadRow(self.display, line, f"its {words[5]} event has no RWBS and "
                                 "sector, process or error")  # fmt: skip
                raise BadRow(self.display, line, f"{shown(words[5])} is not a blkparse action")
            raise BadRow(self.display, line, "is not a blkparse event line")

    # -- the numbers of the D, C and Q events --------------------------------------------
    def _match(self, line_no: np.ndarray, kind: np.ndarray, f: list[pa.Array]) -> None:
        seconds = pc.split_pattern(f[3], ".", max_splits=1)
        whole = pc.cast(pc.list_element(seconds, 0), pa.int64()).to_numpy()
        frac_text = pc.list_element(seconds, 1)
        frac = pc.cast(frac_text, pa.int64()).to_numpy()
        digits = pc.utf8_length(frac_text).to_numpy()
        time_ns = whole * 1_000_000_000 + frac * 10 ** (9 - digits)
        rwbs = self._rwbs_codes(line_no, f[6])
        sector, sectors, tail = self._positions(line_no, kind, f[7])
        requests = sector >= 0
        if not requests.all():
            self.report.skip("SCSI passthrough commands (not block requests)",
                             int(line_no[~requests][0]), int((~requests).sum()))  # fmt: skip
        events = Events(
            line=line_no,
            dev=self._devices.codes(f[0]),
            time=time_ns,
            pid=np.array(pc.cast(f[4], pa.int64()).to_numpy(), copy=True),
            comm=self._strings.codes(tail),
            rwbs=rwbs,
            sector=sector,
            nsec=sectors,
        )
        by_kind = [events.take(np.flatnonzero((kind == k) & requests)) for k in (D, C, Q)]
        direction = np.array([r.direction for r in self._rwbs.values], np.int64)
        for done in self._matcher.block(*by_kind, direction, self._ok):
            self._rows(done)

    def _rwbs_codes(self, line_no: np.ndarray, column: pa.Array) -> np.ndarray:
        try:
            return self._rwbs.codes(column)
        except ValueError as e:
            text = str(e)
            row = pc.index(column, text).as_py()
            why = f"{shown(text)} is not an RWBS field (F?[RWDN]F?A?S?M?)"
            raise BadRow(self.display, int(line_no[row]), why) from None

    def _positions(self, line_no: np.ndarray, kind: np.ndarray, rest: pa.Array):
        """(sector, sectors, process-or-error) of each event from its text after the RWBS;
        sector -1 for forms that are not requests on the device (SCSI passthrough)."""
        n = len(rest)
        sector = np.zeros(n, np.int64)
        sectors = np.zeros(n, np.int64)
        tail: list[str | None] | pa.Array
        common = pc.match_substring_regex(rest, _COMMON_REST_RE)
        common_np = common.to_numpy(zero_copy_only=False)
        usual = rest if common_np.all() else pc.filter(rest, common)
        words = pc.split_pattern(usual, " ", max_splits=3)
        sector[common_np] = pc.cast(pc.list_element(words, 0), pa.int64()).to_numpy()
        sectors[common_np] = pc.cast(pc.list_element(words, 2), pa.int64()).to_numpy()
        bracket = pc.list_element(pc.split_pattern(usual, "[", max_splits=1), 1)
        usual_tail = pc.utf8_slice_codeunits(bracket, 0, -1)
        if common_np.all():
            return sector, sectors, usual_tail
        tail = [None] * n
        for i, value in zip(np.flatnonzero(common_np).tolist(), usual_tail.to_pylist(),
                            strict=True):  # fmt: skip
            tail[i] = value
        texts = rest.to_pylist()
        for i in np.flatnonzero(~common_np).tolist():
            sector[i], sectors[i], tail[i] = self._uncommon(int(line_no[i]), int(kind[i]),
                                                            texts[i])  # fmt: skip
        return sector, sectors, pa.array(tail, pa.string())

    def _uncommon(self, line: int, kind: int, text: str) -> tuple[int, int, str]:
        """Events without `sector + sectors`: a request without data, or not a request."""
        head, bracket, after = text.partition("[")
        tail = after.rstrip()
        if not bracket or not tail.endswith("]"):
            raise BadRow(self.display, line, "has no [process] or [error] at its end")
        tail = tail[:-1]
        words = head.split()
        if not words or words[0].startswith("("):  # "[fio]" or "(elapsed) [fio]"
            return (0, 0, tail) if kind != C else (-1, 0, tail)  # a C prints its sector
        if words[0].isdigit() and (len(words) == 1 or words[1].startswith("(")):
            # A C of a request without data prints its sector; a D or Q with a number and no
            # "+" is a SCSI passthrough command (its size in bytes).
            return (int(words[0]), 0, tail) if kind == C else (-1, 0, tail)
        raise BadRow(self.display, line, f"{shown(head.strip())} is not `sector + sectors`")

    # -- rows ---------------------------------------------------------------------------
    def _rows(self, r: Requests) -> None:
        d = r.d
        info = self._rwbs.values
        op = np.array([_OP_CODE[x.op] for x in info], np.int8)[d.rwbs]
        preflush = np.array([x.preflush for x in info], bool)[d.rwbs]
        op = np.where((d.nsec == 0) & preflush, FLUSH, op)
        keep = op >= 0
        if not keep.all():
            self.report.skip("requests without data that are not flushes (RWBS N)",
                             int(d.line[~keep].min()), int((~keep).sum()))  # fmt: skip
            d, op, preflush = d.take(np.flatnonzero(keep)), op[keep], preflush[keep]
            r = Requests(d, r.complete[keep], r.error[keep])
        if not len(d):
            return
        done = r.complete >= 0
        complete = pa.array(r.complete, mask=~done)
        latency = pa.array(r.complete - d.time, mask=~done)
        strings = pa.array(self._strings.values, pa.string())
        comm = pc.take(strings, pa.array(d.comm))
        columns = [
            pa.array(d.time),
            complete,
            latency,
            pa.DictionaryArray.from_arrays(pa.array(op), _OPS),
            pa.array(d.sector * SECTOR),
            pa.array(d.nsec * SECTOR),
            pa.array(np.array([x.sync for x in info], bool)[d.rwbs]),
            pa.array(np.array([x.fua for x in info], bool)[d.rwbs]),
            pa.array(preflush),
            pa.array(np.array([x.meta for x in info], bool)[d.rwbs]),
            pa.array(d.pid.astype(np.int32)),
            pc.if_else(pc.equal(comm, "(null)"), pa.scalar(None, pa.string()), comm),
            pc.take(pa.array(self._devices.values, pa.string()), pa.array(d.dev)),
            pa.nulls(len(d), pa.int64()),  # queue_ns: blkparse's Q lines are not paired here
            pa.array(d.line),
        ]
        self._ready.append(pa.RecordBatch.from_arrays(columns, schema=RAW_SCHEMA))

    def _finish_report(self) -> None:
        m = self._matcher
        if m.c_without_d[0]:
            self.report.skip("completions without an issue (C without D)", m.c_without_d[1],
                             m.c_without_d[0])  # fmt: skip
        if m.d_without_c[0]:
            self.report.skip("issues without a completion (D without C; kept, latency unknown)",
                             m.d_without_c[1], m.d_without_c[0])  # fmt: skip
            self.report.note(
                "blkparse: an issue without its completion is kept with null latency (the "
                "trace ended first, or the completion was lost)."
            )
        if m.errors:
            self.report.note(
                f"{m.errors} requests completed with an error (blkparse's [error] != 0)."
            )
