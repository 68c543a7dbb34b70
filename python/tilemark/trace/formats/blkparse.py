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
sector, size and direction (first issued, first completed), pid and process from the Q of
the same sector when there was one (the submitter; a D may be issued by a kworker), else the
D's. A C without a D (the request was issued before tracing started) and a D without a C (the
trace ended first, or events were lost) are counted and reported; the latter keep a null
completion. Requests are emitted in issue order.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from tilemark.trace.formats.base import BATCH_ROWS, BadRow, Reader, line_blocks, raw_batch

NAME = "blkparse"
TITLE = "blkparse text (blktrace's default output)"
EXAMPLE = "  8,16   1        3     0.000012345  4162  D   W 1234567 + 8 [fio]"
ABSOLUTE_TIME = False
SECTOR = 512
# Requests issued but not completed that are tracked at once; an older one is given up as
# "D without C" (its completion was lost), which bounds memory on a damaged trace.
MAX_IN_FLIGHT = 1 << 16
# Queue events remembered for their pid and process (bios merged into others never get a D).
MAX_QUEUED = 1 << 16

EVENT_RE = r"^\s*\d+,\d+\s+\d+\s+\d+\s+\d+\.\d+\s+\d+\s+\S+\s"
_EVENT = re.compile(EVENT_RE)
_ACTIONS = frozenset("A B C D F G I M P Q R S T U UT X m".split())
_RWBS = re.compile(r"^(F?)([RWDN])(F?)(A?)(S?)(M?)$")
_SUMMARY_START = re.compile(
    r"^(CPU\d+|Total) \(.*\):\s*$|^\s+Reads Queued:|^\S.*\(\d+(, \.\.\.)?\)\s*$"
)
_SKIPS = re.compile(r"^Skips: ([\d,']+) forward \(([\d,']+) -")
_INPUT = re.compile(r"^Input file .* added\s*$")
D, C, Q = 0, 1, 2
LOST = object()  # the completion of a request given up on (emitted as null)
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
        self.direction = main
        self.op = {"R": "read", "W": "write", "D": "discard", "N": None}[main]

    def op_for(self, sectors: int) -> str | None:
        if sectors == 0 and self.preflush:
            return "flush"
        return self.op


class BlkparseReader(Reader):
    """Vectorised over blocks of lines (which are events, which D/C/Q, their numbers);
    requests are matched in a plain loop over the D, C and Q events."""

    def __init__(self, path: Path, display: str):
        super().__init__(path, display)
        self._pending: dict[tuple, deque] = {}  # match key -> requests issued, not completed
        self._order: deque = deque()  # requests in issue order, until emitted
        self._queued: dict[tuple, tuple[int, str]] = {}  # (device, sector) -> (pid, process)
        self._queued_empty: dict[int, deque] = {}  # device -> (pid, process) of bios without data
        self._rwbs: dict[str, _Rwbs] = {}
        self._devices: dict[str, int] = {}  # "8,16" -> index into _device_names
        self._device_names: list[str] = []
        self._out: dict[str, list] = _empty_columns()
        self._in_summary = False
        self._errors = 0

    def batches(self) -> Iterator[pa.RecordBatch]:
        for first_line, lines in line_blocks(self):
            self._block(first_line, lines)
            while len(self._out["_pos"]) >= BATCH_ROWS:
                yield self._take(BATCH_ROWS)
        # End of the trace: what was issued and never completed.
        while self._order:
            rec = self._order.popleft()
            if rec[2] is None:
                self._lost_completion(rec)
            self._emit(rec)
        self._finish_report()
        while self._out["_pos"]:
            yield self._take(BATCH_ROWS)

    # -- one block of lines ------------------------------------------------------------
    def _block(self, first_line: int, lines: pa.StringArray) -> None:
        is_event = pc.match_substring_regex(lines, EVENT_RE).to_numpy(zero_copy_only=False)
        if not is_event.all():
            self._other_lines(first_line, lines, is_event)
        events = pa.array(np.flatnonzero(is_event))
        if len(events) == 0:
            return
        ev_lines = pc.take(lines, events)
        fields = pc.list_slice(
            pc.utf8_split_whitespace(pc.utf8_trim_whitespace(ev_lines), max_splits=7),
            0,
            8,
            return_fixed_size_list=True,
        )
        action = pc.list_element(fields, 5)
        known = pc.is_in(action, pa.array(sorted(_ACTIONS))).to_numpy(zero_copy_only=False)
        if not known.all():
            bad = int(np.flatnonzero(~known)[0])
            line = first_line + int(events[bad].as_py())
            raise BadRow(self.display, line, f"{action[bad].as_py()!r} is not a blkparse action")
        kind = pc.index_in(action, _KINDS)
        wanted = pc.is_valid(kind)
        if pc.any(pc.equal(action, "m")).as_py():
            n = pc.sum(pc.equal(action, "m")).as_py()
            first = int(events[pc.index(action, "m").as_py()].as_py())
            self.report.skip("blkparse messages (action m)", first_line + first, n)
        sel = pc.indices_nonzero(wanted)
        if len(sel) == 0:
            return
        f = [pc.list_element(pc.take(fields, sel), k) for k in range(8)]
        line_no = (pc.take(events, sel).to_numpy() + first_line).tolist()
        self._match(first_line, line_no, pc.take(kind, sel), f)

    def _other_lines(self, first_line: int, lines: pa.StringArray, is_event: np.ndarray) -> None:
        """Blank lines, `Input file ... added` and the summary are allowed; nothing else."""
        for i in np.flatnonzero(~is_event).tolist():
            text = lines[i].as_py().rstrip("\r\n")
            if not text.strip() or _INPUT.match(text):
                continue
            if not self._in_summary and _SUMMARY_START.match(text):
                self._in_summary = True
            if self._in_summary:
                skips = _SKIPS.match(text)
                if skips:
                    self.report.events_lost += int(re.sub(r"[,']", "", skips.group(2)))
                self.report.skip("blkparse summary lines", first_line + i)
                continue
            raise BadRow(self.display, first_line + i, "is not a blkparse event line")

    # -- numbers of the D, C and Q events ------------------------------------------------
    def _match(self, first_line: int, line_no: list[int], kind: pa.Array, f: list[pa.Array]):
        dev_codes, dev_index = self._dictionary(f[0], self._device_index)
        dev = [dev_index[c] for c in dev_codes]
        seconds = pc.split_pattern(f[3], ".", max_splits=1)
        seconds = pc.list_slice(seconds, 0, 2, return_fixed_size_list=True)
        whole = pc.cast(pc.list_element(seconds, 0), pa.int64()).to_numpy()
        frac_text = pc.list_element(seconds, 1)
        frac = pc.cast(frac_text, pa.int64()).to_numpy()
        digits = pc.utf8_length(frac_text).to_numpy()
        time_ns = (whole * 1_000_000_000 + frac * 10 ** (9 - digits)).tolist()
        pid = pc.cast(f[4], pa.int64()).to_numpy().tolist()
        rwbs_codes, rwbs = self._dictionary(f[6], self._rwbs_of_line(first_line, line_no, f[6]))
        sector, sectors, tail = self._positions(line_no, kind, f[7])
        tail_codes, tails = self._dictionary(tail, lambda s, _i: s)
        self._loop(
            line_no,
            kind.to_numpy(zero_copy_only=False).tolist(),
            dev,
            time_ns,
            pid,
            [rwbs[c] for c in rwbs_codes],
            sector,
            sectors,
            [tails[c] for c in tail_codes],
        )

    def _dictionary(self, values: pa.Array, convert) -> tuple[list[int], list[Any]]:
        """Row codes and the converted value of each distinct string."""
        encoded = pc.dictionary_encode(values)
        distinct = encoded.dictionary.to_pylist()
        codes = encoded.indices.to_numpy(zero_copy_only=False).tolist()
        return codes, [convert(s, i) for i, s in enumerate(distinct)]

    def _device_index(self, text: str, _i: int) -> int:
        index = self._devices.get(text)
        if index is None:
            index = self._devices[text] = len(self._device_names)
            self._device_names.append(_device_label(text))
        return index

    def _rwbs_of_line(self, first_line: int, line_no: list[int], column: pa.Array):
        def convert(text: str, _i: int) -> _Rwbs:
            info = self._rwbs.get(text)
            if info is None:
                try:
                    info = self._rwbs[text] = _Rwbs(text)
                except ValueError:
                    row = pc.index(column, text).as_py()
                    raise BadRow(
                        self.display,
                        line_no[row],
                        f"{text!r} is not an RWBS field (F?[RWDN]F?A?S?M?)",
                    ) from None
            return info

        return convert

    def _positions(self, line_no: list[int], kind: pa.Array, rest: pa.Array):
        """(sector, sectors, process-or-error) of each event from its text after the RWBS;
        sector None for forms that are not requests on the device (SCSI passthrough)."""
        rest = pc.fill_null(rest, "")
        parts = pc.list_slice(
            pc.split_pattern(rest, "[", max_splits=1), 0, 2, return_fixed_size_list=True
        )
        head, bracket = pc.list_element(parts, 0), pc.list_element(parts, 1)
        tail = pc.if_else(
            pc.ends_with(pc.fill_null(bracket, ""), "]"),
            pc.utf8_slice_codeunits(pc.fill_null(bracket, ""), 0, -1),
            pc.fill_null(bracket, ""),
        )
        h = pc.list_slice(
            pc.utf8_split_whitespace(pc.utf8_trim_whitespace(head)),
            0,
            3,
            return_fixed_size_list=True,
        )
        h0, h1, h2 = (pc.fill_null(pc.list_element(h, k), "") for k in range(3))
        common = pc.and_(
            pc.and_(pc.is_valid(bracket), pc.equal(h1, "+")),
            pc.and_(pc.match_substring_regex(h0, r"^\d+$"), pc.match_substring_regex(h2, r"^\d+$")),
        )
        common_np = common.to_numpy(zero_copy_only=False)
        zero = pa.scalar("0")
        sector = pc.cast(pc.if_else(common, h0, zero), pa.int64()).to_numpy().tolist()
        sectors = pc.cast(pc.if_else(common, h2, zero), pa.int64()).to_numpy().tolist()
        if not common_np.all():
            kinds = kind.to_numpy(zero_copy_only=False)
            texts = rest.to_pylist()
            for i in np.flatnonzero(~common_np).tolist():
                sector[i], sectors[i] = self._uncommon(line_no[i], int(kinds[i]), texts[i])
        return sector, sectors, tail

    def _uncommon(self, line: int, kind: int, text: str) -> tuple[int | None, int]:
        """Events without `sector + sectors`: a request without data, or not a request."""
        head, bracket, _ = text.partition("[")
        if not bracket:
            raise BadRow(self.display, line, "has no [process] or [error] at its end")
        words = head.split()
        if not words or words[0].startswith("("):  # "[fio]" or "(elapsed) [fio]"
            return (0, 0) if kind != C else (None, 0)  # a C always prints its sector
        if words[0].isdigit() and (len(words) == 1 or words[1].startswith("(")):
            # A C of a request without data prints its sector; a D or Q with a number and no
            # "+" is a SCSI passthrough command (its size in bytes).
            return (int(words[0]), 0) if kind == C else (None, 0)
        raise BadRow(self.display, line, f"{head.strip()!r} is not `sector + sectors`")

    # -- matching issues with completions --------------------------------------------------
    def _loop(self, line_no, kind, dev, time_ns, pid, rwbs, sector, sectors, tail):
        pending, order, queued, empty = self._pending, self._order, self._queued, self._queued_empty
        for line, k, d, t, p, rw, s, n, tl in zip(
            line_no, kind, dev, time_ns, pid, rwbs, sector, sectors, tail, strict=True
        ):
            if s is None:
                self.report.skip("SCSI passthrough commands (not block requests)", line)
                continue
            if k == Q:
                if not n:  # a flush: no sector to find its request by, so first come first
                    waiting = empty.get(d)
                    if waiting is None:
                        waiting = empty[d] = deque(maxlen=MAX_QUEUED)
                    waiting.append((p, tl))
                    continue
                queued[(d, s)] = (p, tl)
                if len(queued) > MAX_QUEUED:
                    for old in list(queued)[: MAX_QUEUED // 2]:
                        del queued[old]
                continue
            key = (d, s if n else -1, n, rw.direction)
            if k == D:
                if n:
                    submitter = queued.pop((d, s), None)
                else:
                    waiting = empty.get(d)
                    submitter = waiting.popleft() if waiting else None
                rec = [line, t, None, rw, d, s, n, *(submitter or (p, tl))]
                waiting = pending.get(key)
                if waiting is None:
                    pending[key] = deque((rec,))
                else:
                    waiting.append(rec)
                order.append(rec)
                if len(order) > MAX_IN_FLIGHT:
                    self._give_up_oldest()
                continue
            waiting = pending.get(key)
            if not waiting:
                self.report.skip("completions without an issue (C without D)", line)
                continue
            rec = waiting.popleft()
            if not waiting:
                del pending[key]
            rec[2] = t
            if tl != "0":
                self._errors += 1
            while order and order[0][2] is not None:
                self._emit(order.popleft())

    def _give_up_oldest(self) -> None:
        """The oldest requests have waited for their completion too long: emit them without."""
        order = self._order
        while len(order) > MAX_IN_FLIGHT:
            rec = order.popleft()
            if rec[2] is None:
                self._unpend(rec)
                self._lost_completion(rec)
            self._emit(rec)
        while order and order[0][2] is not None:
            self._emit(order.popleft())

    def _unpend(self, rec: list) -> None:
        key = (rec[4], rec[5] if rec[6] else -1, rec[6], rec[3].direction)
        waiting = self._pending.get(key)
        if waiting:
            waiting.remove(rec)
            if not waiting:
                del self._pending[key]

    def _lost_completion(self, rec: list) -> None:
        self.report.skip("issues without a completion (D without C; kept, latency unknown)", rec[0])
        rec[2] = LOST

    def _emit(self, rec: list) -> None:
        line, issue, complete, rw, d, s, n, p, comm = rec
        op = rw.op_for(n)
        if op is None:
            self.report.skip("requests without data that are not flushes (RWBS N)", line)
            return
        device = self._device_names[d]
        out = self._out
        out["_pos"].append(line)
        out["issue_ns"].append(issue)
        done = complete is not None and complete is not LOST
        out["complete_ns"].append(complete if done else None)
        out["latency_ns"].append(complete - issue if done else None)
        out["op"].append(op)
        out["offset"].append(s * SECTOR)
        out["size"].append(n * SECTOR)
        out["sync"].append(rw.sync)
        out["fua"].append(rw.fua)
        out["preflush"].append(rw.preflush)
        out["meta"].append(rw.meta)
        out["pid"].append(p)
        out["comm"].append(None if comm == "(null)" else comm)
        out["device"].append(device)

    def _take(self, rows: int) -> pa.RecordBatch:
        out = self._out
        head = {k: v[:rows] for k, v in out.items()}
        for v in out.values():
            del v[:rows]
        pos = head.pop("_pos")
        return raw_batch(head, pos)

    def _finish_report(self) -> None:
        if self._errors:
            self.report.note(
                f"{self._errors} requests completed with an error (blkparse's [error] != 0)."
            )
        unmatched = [r for r in self.report.skipped if "without" in r]
        if unmatched:
            self.report.note(
                "blkparse: issues and completions that do not pair up are counted in the "
                "import summary; an issue without its completion is kept with null latency."
            )


def _empty_columns() -> dict[str, list]:
    names = [
        "_pos",
        "issue_ns",
        "complete_ns",
        "latency_ns",
        "op",
        "offset",
        "size",
        "sync",
        "fua",
        "preflush",
        "meta",
        "pid",
        "comm",
        "device",
    ]
    return {n: [] for n in names}
