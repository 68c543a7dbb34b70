"""Pairs blkparse's events into requests, column-wise (numpy), one block of lines at a time.

- Issue (D) and completion (C): the k-th D and the k-th C of the same device, sector, size
  and direction pair up (first issued, first completed). A C that comes before any D of its
  key pairs with nothing (the request was issued before tracing began); a group where rank
  pairing would put a C before its D is replayed one event at a time (rare: only around such
  completions). D's without their C wait for later blocks, up to `max_in_flight` newer D's,
  then are given up (their completion was lost) and emitted without one.
- Queue (Q) and issue: a D takes the pid and process of the last Q of its device and sector
  before it (the submitter; a D may be issued by a kworker). Requests without data (flushes)
  have no sector: their Q's and D's pair first in, first out per device.

State between blocks is bounded: the waiting D's (at most max_in_flight), the Q's not yet
issued (at most MAX_QUEUED, the newest).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

MAX_QUEUED = 1 << 16


@dataclass
class Events:
    """Columns of D, C or Q events, in line order. `comm` indexes the reader's strings (the
    process of a D or Q, the error of a C); `rwbs` the reader's RWBS table."""

    line: np.ndarray
    dev: np.ndarray
    time: np.ndarray
    pid: np.ndarray
    comm: np.ndarray
    rwbs: np.ndarray
    sector: np.ndarray
    nsec: np.ndarray

    def __len__(self) -> int:
        return len(self.line)

    def take(self, index: np.ndarray) -> Events:
        return Events(*(getattr(self, f.name)[index] for f in fields(self)))

    @staticmethod
    def concat(a: Events, b: Events) -> Events:
        return Events(*(np.concatenate([getattr(a, f.name), getattr(b, f.name)])
                        for f in fields(Events)))  # fmt: skip

    @staticmethod
    def empty() -> Events:
        return Events(*(np.zeros(0, np.int64) for _ in fields(Events)))


@dataclass
class Requests:
    """Requests ready to be rows: their D's columns, completion time (-1: none), whether the
    completion reported an error."""

    d: Events
    complete: np.ndarray
    error: np.ndarray


def rank_pairs(
    keys_a: list[np.ndarray], line_a: np.ndarray, keys_b: list[np.ndarray], line_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Pair the k-th a with the k-th b of each key (both sides in line order).

    Returns (paired a indices, paired b indices, group of each a, group of each b, groups
    where a pair has its b before its a)."""
    n_a, n_b = len(line_a), len(line_b)
    if n_a == 0 or n_b == 0:
        none = np.zeros(0, np.int64)
        return none, none, np.zeros(n_a, np.int64), np.zeros(n_b, np.int64), none
    keys = [np.concatenate([ka, kb]) for ka, kb in zip(keys_a, keys_b, strict=True)]
    line = np.concatenate([line_a, line_b])
    is_a = np.r_[np.ones(n_a, bool), np.zeros(n_b, bool)]
    order = np.lexsort((line, *reversed(keys)))
    n = len(order)
    new_group = np.ones(n, bool)
    if n > 1:
        same = np.ones(n - 1, bool)
        for k in keys:
            ks = k[order]
            same &= ks[1:] == ks[:-1]
        new_group[1:] = ~same
    gid = np.cumsum(new_group) - 1
    starts = np.flatnonzero(new_group)
    a_sorted = is_a[order]
    rank = np.empty(n, np.int64)
    for side in (a_sorted, ~a_sorted):
        inclusive = np.cumsum(side)
        before_group = (inclusive - side)[starts]  # this side's events before each group
        rank[side] = (inclusive - 1 - before_group[gid])[side]
    pair_key = gid * (n + 1) + rank
    pos_a, pos_b = np.flatnonzero(a_sorted), np.flatnonzero(~a_sorted)
    _, ia, ib = np.intersect1d(pair_key[pos_a], pair_key[pos_b], assume_unique=True,
                               return_indices=True)  # fmt: skip
    idx_a = order[pos_a[ia]]
    idx_b = order[pos_b[ib]] - n_a
    group_a = np.empty(n_a, np.int64)
    group_a[order[pos_a]] = gid[pos_a]
    group_b = np.empty(n_b, np.int64)
    group_b[order[pos_b] - n_a] = gid[pos_b]
    bad = np.unique(group_a[idx_a][line_b[idx_b] < line_a[idx_a]])
    return idx_a, idx_b, group_a, group_b, bad


def _fifo(lines_a: np.ndarray, lines_b: np.ndarray) -> list[tuple[int, int]]:
    """First-in first-out pairs of a's and b's of one key, event by event (a b with no a
    waiting pairs with nothing)."""
    events = sorted([(int(x), 0, i) for i, x in enumerate(lines_a)]
                    + [(int(x), 1, i) for i, x in enumerate(lines_b)])  # fmt: skip
    waiting: list[int] = []
    pairs = []
    for _, side, i in events:
        if side == 0:
            waiting.append(i)
        elif waiting:
            pairs.append((waiting.pop(0), i))
    return pairs


class Matcher:
    """The pairing state across blocks (see the module doc)."""

    def __init__(self, max_in_flight: int):
        self.max_in_flight = max_in_flight
        self.pending = Events.empty()  # D's waiting for their C
        self.pending_ordinal = np.zeros(0, np.int64)  # each waiting D's number among all D's
        self.queued = Events.empty()  # Q's with data not yet issued
        self.queued_empty = Events.empty()  # Q's without data not yet issued
        self.d_seen = 0
        self.c_without_d = [0, 0]  # count, first line
        self.d_without_c = [0, 0]
        self.errors = 0

    def block(
        self, d: Events, c: Events, q: Events, direction: np.ndarray, ok_error: int
    ) -> list[Requests]:
        """Pair one block's events; returns the requests now complete or given up."""
        self._submitters(d, q)
        ordinal = self.d_seen + np.arange(len(d))
        self.d_seen += len(d)
        ds = Events.concat(self.pending, d)
        ordinals = np.concatenate([self.pending_ordinal, ordinal])

        def key(e: Events) -> list[np.ndarray]:
            empty = e.nsec == 0
            return [e.dev, np.where(empty, -1, e.sector), e.nsec, direction[e.rwbs]]

        ia, ib, group_d, group_c, bad = rank_pairs(key(ds), ds.line, key(c), c.line)
        if len(bad):
            ia, ib = self._replay(bad, ia, ib, group_d, group_c, ds, c)
        out = []
        if len(ia):
            error = c.comm[ib] != ok_error
            self.errors += int(error.sum())
            out.append(Requests(ds.take(ia), c.time[ib], error))
        orphans = np.ones(len(c), bool)
        orphans[ib] = False
        if orphans.any():
            self._count(self.c_without_d, c.line[orphans])
        waiting = np.ones(len(ds), bool)
        waiting[ia] = False
        given_up = waiting & (ordinals < self.d_seen - self.max_in_flight)
        if given_up.any():
            out.append(self._lost(ds.take(np.flatnonzero(given_up))))
        keep = np.flatnonzero(waiting & ~given_up)
        self.pending, self.pending_ordinal = ds.take(keep), ordinals[keep]
        return out

    def finish(self) -> list[Requests]:
        """What was issued and never completed, at the end of the trace."""
        if not len(self.pending):
            return []
        out = [self._lost(self.pending)]
        self.pending = Events.empty()
        return out

    def _lost(self, d: Events) -> Requests:
        self._count(self.d_without_c, d.line)
        return Requests(d, np.full(len(d), -1, np.int64), np.zeros(len(d), bool))

    @staticmethod
    def _count(counter: list[int], lines: np.ndarray) -> None:
        first = int(lines.min())
        counter[1] = first if counter[0] == 0 else min(counter[1], first)
        counter[0] += len(lines)

    def _replay(self, bad, ia, ib, group_d, group_c, ds: Events, c: Events):
        """Replace the pairs of groups where rank pairing put a C before its D by pairs made
        event by event."""
        keep = ~np.isin(group_d[ia], bad)
        ia, ib = [ia[keep]], [ib[keep]]
        for g in bad.tolist():
            members_d = np.flatnonzero(group_d == g)
            members_c = np.flatnonzero(group_c == g)
            for a, b in _fifo(ds.line[members_d], c.line[members_c]):
                ia.append(np.array([members_d[a]]))
                ib.append(np.array([members_c[b]]))
        return np.concatenate(ia), np.concatenate(ib)

    def _submitters(self, d: Events, q: Events) -> None:
        """Give each D the pid and process of its Q (see the module doc)."""
        with_data = q.nsec > 0
        queued = Events.concat(self.queued, q.take(np.flatnonzero(with_data)))
        dd = np.flatnonzero(d.nsec > 0)
        if len(queued) and len(dd):
            n_q = len(queued)
            dev = np.concatenate([queued.dev, d.dev[dd]])
            sector = np.concatenate([queued.sector, d.sector[dd]])
            line = np.concatenate([queued.line, d.line[dd]])
            order = np.lexsort((line, sector, dev))
            sdev, ssec = dev[order], sector[order]
            same_as_previous = np.r_[False, (sdev[1:] == sdev[:-1]) & (ssec[1:] == ssec[:-1])]
            is_q = order < n_q
            previous_q = np.r_[False, is_q[:-1]]
            takes = ~is_q & same_as_previous & previous_q
            positions = np.flatnonzero(takes)
            d_rows = dd[order[positions] - n_q]
            q_rows = order[positions - 1]
            d.pid[d_rows] = queued.pid[q_rows]
            d.comm[d_rows] = queued.comm[q_rows]
            # Still waiting: Q's that are the last event of their device and sector.
            last_of_key = np.r_[~same_as_previous[1:], True]
            left = order[is_q & last_of_key]
            queued = queued.take(np.sort(left))
        self.queued = queued.take(np.arange(max(0, len(queued) - MAX_QUEUED), len(queued)))
        # Requests without data (flushes): first in, first out per device.
        empty_q = Events.concat(self.queued_empty, q.take(np.flatnonzero(~with_data)))
        de = np.flatnonzero(d.nsec == 0)
        if len(empty_q) and len(de):
            iq, idd, _, _, _ = rank_pairs([empty_q.dev], empty_q.line, [d.dev[de]], d.line[de])
            fine = empty_q.line[iq] < d.line[de[idd]]
            iq, idd = iq[fine], idd[fine]
            d.pid[de[idd]] = empty_q.pid[iq]
            d.comm[de[idd]] = empty_q.comm[iq]
            left = np.ones(len(empty_q), bool)
            left[iq] = False
            # A Q after the block's last flush D of its device waits for the next block.
            last_d = {int(v): int(x) for v, x in zip(d.dev[de], d.line[de], strict=True)}
            later = np.array(
                [
                    ln > last_d.get(int(v), -1)
                    for v, ln in zip(empty_q.dev, empty_q.line, strict=True)
                ],
                bool,
            )
            empty_q = empty_q.take(np.flatnonzero(left & later))  # fmt: skip
        self.queued_empty = empty_q.take(np.arange(max(0, len(empty_q) - MAX_QUEUED), len(empty_q)))
