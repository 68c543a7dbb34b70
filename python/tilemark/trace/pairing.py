"""Block events to requests: each issue paired with its completion and its submitter.

A capture reads three kinds of events (tracefs.py): Q, a bio queued by the process that
submitted it (its pid and name); D, a request issued to the driver; C, a request completed.
Events come per CPU, so a batch is not in time order and a request's D and C may arrive in
different batches. The pairer keeps what cannot be decided yet and hands out rows in issue
order, in numpy arrays (one Python step per batch, not per event):

- events up to a watermark (a time before which every CPU's events have been read) are
  decided; later ones wait for the next batch;
- the key of a request is (device, sector, op); within a key, D and C pair first-in first-out
  (two reads of the same block may be in flight at once); a D whose C has not come yet waits
  (at most `max_pending_ns`; after that it is written without a completion, and its late C
  counted as unmatched);
- a D takes the pid and name of the latest Q of its key before it; with none (a flush the
  block layer made, a bio merged into another request), those of the task that issued it;
  that Q's time is the request's queue time (when the application submitted it; the wait up
  to D is a plug, a scheduler, a tag or writeback throttling: `replay --times queue`);
- a completion of zero sectors of a read or write is the block layer finishing a request
  whose data already completed in a flush sequence (preflush/FUA emulation): ignored;
- a C with no D is a request issued before tracing began (or whose D was dropped): counted;
  a D still without C at the end was in flight when tracing stopped: written, null completion.

Rows leave in issue order: a row is handed out only when no earlier-issued request can still
arrive (its issue time is before the watermark and before every waiting D).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

Q, D, C = 0, 1, 2
OP_READ, OP_WRITE, OP_FLUSH, OP_DISCARD, OP_OTHER = 0, 1, 2, 3, 4
OP_NAMES = ("read", "write", "flush", "discard")  # the trace schema's op dictionary order
SYNC, FUA, PREFLUSH, META = 1, 2, 4, 8

EVENT_DTYPE = np.dtype(
    [
        ("t", "<i8"),
        ("kind", "u1"),
        ("op", "u1"),
        ("flags", "u1"),
        ("dev", "<u4"),
        ("sector", "<u8"),
        ("nsec", "<u4"),
        ("pid", "<i4"),
        ("comm", "<i4"),
        # A D's queue time, kept while it waits for its C (its Q is used up by then); 0: none.
        ("queued", "<i8"),
    ]
)
ROW_DTYPE = np.dtype(
    [
        ("issue", "<i8"),
        ("complete", "<i8"),  # -1: not seen
        ("op", "u1"),
        ("flags", "u1"),
        ("dev", "<u4"),
        ("sector", "<u8"),
        ("nsec", "<u4"),
        ("pid", "<i4"),
        ("comm", "<i4"),  # index into the capture's table of process names; -1 unknown
        ("queue", "<i8"),  # when its first bio was queued (its Q); -1: not seen
    ]
)
# A Q waits this long for its D (requests wait in a scheduler queue or a plug before issue).
QUEUE_HOLD_NS = 2_000_000_000


def parse_rwbs(text: bytes) -> tuple[int, int]:
    """(op, flags) of the kernel's rwbs string (blk_fill_rwbs): an optional F (preflush), the
    op letter (W write, R read, D discard, F flush, N other), then F (FUA), A, S (sync), M."""
    s = text.split(b"\0", 1)[0].decode("ascii", "replace")
    flags = 0
    if len(s) >= 2 and s[0] == "F" and s[1] in "WRDFN":
        flags |= PREFLUSH
        s = s[1:]
    if not s:
        return OP_OTHER, flags
    op = {"R": OP_READ, "W": OP_WRITE, "D": OP_DISCARD, "F": OP_FLUSH}.get(s[0], OP_OTHER)
    rest = s[1:]
    if op == OP_DISCARD and rest.startswith("E"):  # secure erase
        rest = rest[1:]
    if "F" in rest:
        flags |= FUA
    if "S" in rest:
        flags |= SYNC
    if "M" in rest:
        flags |= META
    return op, flags


@dataclass
class PairCounts:
    """What the pairer could not turn into complete rows, for the summary and the metadata."""

    completions_without_issue: int = 0  # issued before tracing began, or its D was dropped
    in_flight_at_end: int = 0  # written with a null completion
    written_incomplete_early: int = 0  # waited longer than max_pending_ns, written without C
    other_ops: int = 0  # requests of ops the trace schema has no name for (rwbs N)


class Pairer:
    """Feed event batches with `add`, take rows with `advance(watermark)`, then `finish()`."""

    def __init__(self, max_pending_ns: int = 10_000_000_000):
        self.max_pending_ns = max_pending_ns
        # Once set (the capture is stopping), requests issued at or after it are left out and
        # only the completions of those issued before it are still awaited.
        self.cutoff: int | None = None
        self.counts = PairCounts()
        self._events = np.zeros(0, EVENT_DTYPE)  # undecided: after the watermark, or waiting
        self._held = np.zeros(0, ROW_DTYPE)  # paired rows not yet safe to hand out

    def add(self, events: np.ndarray) -> None:
        if len(events):
            self._events = np.concatenate([self._events, events])

    def advance(self, watermark: int) -> np.ndarray:
        """Rows that are final: every request issued before the returned rows is in them."""
        ev = self._events
        ready = ev["t"] <= watermark
        rows, waiting_d, waiting_q = self._pair(ev[ready], watermark)
        stale = waiting_d["t"] < watermark - self.max_pending_ns
        if stale.any():
            self.counts.written_incomplete_early += int(stale.sum())
            rows = np.concatenate([rows, _incomplete_rows(waiting_d[stale])])
            waiting_d = waiting_d[~stale]
        self._events = np.concatenate([waiting_q, waiting_d, ev[~ready]])
        held = np.concatenate([self._held, rows])
        cutoff = watermark if not len(waiting_d) else min(watermark, int(waiting_d["t"].min()))
        out = held["issue"] < cutoff
        self._held = held[~out]
        done = held[out]
        return done[np.argsort(done["issue"], kind="stable")]

    def waiting_before(self, t: int) -> int:
        """Requests issued before t whose completion has not been seen (or not decided) yet."""
        ev = self._events
        return int(((ev["kind"] == D) & (ev["t"] < t)).sum())

    def finish(self) -> np.ndarray:
        """Every row left, in issue order; requests without completion have complete = -1."""
        ev = self._events
        end = int(ev["t"].max()) + 1 if len(ev) else 0
        rows, waiting_d, _ = self._pair(ev, end)
        self.counts.in_flight_at_end += len(waiting_d)
        held = np.concatenate([self._held, rows, _incomplete_rows(waiting_d)])
        self._held = np.zeros(0, ROW_DTYPE)
        self._events = np.zeros(0, EVENT_DTYPE)
        return held[np.argsort(held["issue"], kind="stable")]

    def _pair(self, ev: np.ndarray, watermark: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows paired, D events still waiting, Q events kept for later D events)."""
        kind = ev["kind"]
        op = ev["op"]
        # Zero-sector completions of reads and writes end a flush sequence: not a request.
        echo = (kind == C) & (ev["nsec"] == 0) & (op != OP_FLUSH) & (op != OP_DISCARD)
        other = (kind != Q) & (op == OP_OTHER)
        if other.any():
            self.counts.other_ops += int(((kind == D) & other).sum())
        late = np.zeros(len(ev), bool)
        if self.cutoff is not None:  # issued after the capture stopped: not in the trace
            late = (kind == D) & (ev["t"] >= self.cutoff)
        if echo.any() or other.any() or late.any():
            ev = ev[~echo & ~other & ~late]
        # One sort by request key (device, sector, op), then time (Q before D before C).
        key = _request_keys(ev)
        order = np.lexsort((ev["t"] * 4 + ev["kind"], key))
        ev, key = ev[order], key[order]
        kind, t = ev["kind"], ev["t"]
        n = len(ev)
        new_key = np.ones(n, bool)
        new_key[1:] = key[1:] != key[:-1]
        group = np.cumsum(new_key) - 1

        # Q -> D: the latest Q of the same key at or before each D.
        idx = np.arange(n)
        last_q = np.maximum.accumulate(np.where(kind == Q, idx, -1)) if n else idx
        has_q = (kind == D) & (last_q >= 0)
        has_q[has_q] = group[last_q[has_q]] == group[has_q]
        pid, comm = ev["pid"], ev["comm"]
        # A D that waited for its C in an earlier batch carries its queue time already.
        queued = np.where(ev["queued"] > 0, ev["queued"], -1)
        if has_q.any():
            pid, comm = pid.copy(), comm.copy()
            pid[has_q], comm[has_q] = pid[last_q[has_q]], comm[last_q[has_q]]
            fresh = has_q & (queued < 0)
            queued[fresh] = t[last_q[fresh]]
        used_q = np.zeros(n, bool)
        used_q[last_q[has_q]] = True
        keep_q = (kind == Q) & ~used_q & (t >= watermark - QUEUE_HOLD_NS)

        # D -> C: a D directly followed (among the D and C of its key) by a C is its request.
        dc = np.flatnonzero(kind != Q)
        k, g = kind[dc], group[dc]
        pair = np.zeros(len(dc), bool)
        if len(dc) > 1:
            pair[:-1] = (k[:-1] == D) & (k[1:] == C) & (g[:-1] == g[1:])
        c_of_pair = np.zeros(len(dc), bool)
        c_of_pair[1:] = pair[:-1]
        lone = ~pair & ~c_of_pair
        lone_d, lone_c = lone & (k == D), lone & (k == C)
        # A lone D before a lone C of the same key (two requests of one block in flight at
        # once) needs first-in first-out: those keys are paired event by event.
        tangled = np.zeros(0, np.int64)
        if lone_d.any() and lone_c.any():
            first_lone_d = np.full(int(group[-1]) + 1, np.iinfo(np.int64).max)
            np.minimum.at(first_lone_d, g[lone_d], dc[lone_d])
            last_lone_c = np.full(int(group[-1]) + 1, -1)
            np.maximum.at(last_lone_c, g[lone_c], dc[lone_c])
            tangled = np.flatnonzero(first_lone_d < last_lone_c)
        if len(tangled):
            slow = np.isin(g, tangled)
            pair &= ~slow
            c_of_pair &= ~slow
            lone_d &= ~slow
            lone_c &= ~slow
            sd, sc, sld, slc = _match_slowly(kind, dc[slow], group)
            d_idx = np.concatenate([dc[pair], sd])
            c_idx = np.concatenate([dc[c_of_pair], sc])
            lone_d_idx = np.concatenate([dc[lone_d], sld])
            lone_c_idx = np.concatenate([dc[lone_c], slc])
        else:
            d_idx, c_idx = dc[pair], dc[c_of_pair]
            lone_d_idx, lone_c_idx = dc[lone_d], dc[lone_c]
        lone_c_t = t[lone_c_idx]
        if self.cutoff is not None:  # completions of requests issued after the cutoff
            lone_c_t = lone_c_t[lone_c_t < self.cutoff]
        self.counts.completions_without_issue += len(lone_c_t)

        rows = np.zeros(len(d_idx), ROW_DTYPE)
        _fill_rows(rows, ev, d_idx, pid, comm, queued)
        rows["complete"] = t[c_idx]
        waiting = ev[lone_d_idx]
        waiting["pid"], waiting["comm"] = pid[lone_d_idx], comm[lone_d_idx]
        waiting["queued"] = np.maximum(queued[lone_d_idx], 0)
        return rows, waiting, ev[keep_q]


def _request_keys(ev: np.ndarray) -> np.ndarray:
    """One integer per event naming its request: sector, device, op (sectors < 2^50). A flush
    has no sector: the kernel issues it at sector 0 and completes it at 2^64 - 1, so flushes
    are keyed at sector 0 (they pair first-in first-out per device)."""
    _, dev_index = np.unique(ev["dev"], return_inverse=True)
    sector = np.where(ev["op"] == OP_FLUSH, 0, ev["sector"]).astype(np.int64)
    return (
        (sector << 13) | (dev_index.reshape(-1).astype(np.int64) << 3) | ev["op"].astype(np.int64)
    )


def _match_slowly(kind: np.ndarray, dc: np.ndarray, group: np.ndarray):
    """First-in first-out pairing event by event (dc sorted by key, then time)."""
    pairs_d: list[int] = []
    pairs_c: list[int] = []
    lone_d: list[int] = []
    lone_c: list[int] = []
    queue: list[int] = []
    prev = -1
    for i in dc.tolist():
        g = int(group[i])
        if g != prev:
            lone_d.extend(queue)
            queue, prev = [], g
        if kind[i] == D:
            queue.append(i)
        elif queue:
            pairs_d.append(queue.pop(0))
            pairs_c.append(i)
        else:
            lone_c.append(i)
    lone_d.extend(queue)
    as_array = lambda xs: np.asarray(xs, dtype=np.int64)  # noqa: E731
    return as_array(pairs_d), as_array(pairs_c), as_array(lone_d), as_array(lone_c)


def _fill_rows(rows: np.ndarray, ev: np.ndarray, d_idx: np.ndarray, pid, comm, queued) -> None:
    rows["issue"] = ev["t"][d_idx]
    for f in ("op", "flags", "dev", "sector", "nsec"):
        rows[f] = ev[f][d_idx]
    rows["pid"], rows["comm"] = pid[d_idx], comm[d_idx]
    rows["queue"] = queued[d_idx]


def _incomplete_rows(d_events: np.ndarray) -> np.ndarray:
    rows = np.zeros(len(d_events), ROW_DTYPE)
    queued = np.where(d_events["queued"] > 0, d_events["queued"], -1)
    every = np.arange(len(d_events))
    _fill_rows(rows, d_events, every, d_events["pid"], d_events["comm"], queued)
    rows["complete"] = -1
    return rows
