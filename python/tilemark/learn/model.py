"""The statistical model of a trace: its IOs split into streams by who issued them and how,
and per stream what moves storage (docs/learn.md has what each profile key is fitted from).

Streams. Every read or write is keyed by its process family (the comm without its instance
suffix: `kworker/u8:2` -> kworker, `jbd2/loop3-8` -> jbd2) and its kind: a read, a write the
kernel marked sync (written for an fsync, O_DIRECT, O_DSYNC: an application waiting for it), or
an async write (page-cache writeback). Sync writes a process's fsync wrote back, dispatched
together (FILESYNC_RUN of them or more, each within FILESYNC_GAP_NS of the one before, not all
one contiguous write), are a kind of their own: a file's fsync, not a log's write and flush.
A database's backends thus give a `postgres_read` stream, its WAL writes a `postgres_log`
stream, its checkpointer's fsyncs of the data files a `postgres_filesync` stream, the flusher
threads a `kworker_writeback` stream and the ext4 journal a `jbd2_journal` stream, whatever
the pids. Keys with too few IOs to fit (below MIN_STREAM_IOS) join the largest stream of the
same kind, else the largest one (a few file-sync writes join their family's sync writes).
Flushes belong to the sync writers of the process family that issued them, else to every sync
writer: a file-sync stream takes one per run of writes, the largest other stream the rest.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

import numpy as np

from tilemark.errors import UsageError
from tilemark.learn import commits, placement
from tilemark.learn.traces import Columns
from tilemark.units import format_size

MIN_STREAM_IOS = 20
MAX_SIZES = 12  # distinct sizes kept in a stream's mix; the rest are shared out (_size_mix)
MIN_SIZE_SHARE = 0.005
SEQUENTIAL_PCT = 98.0  # a stream this sequential is written as a sequential stream
POISSON_CV = 0.7  # inter-arrival CV from which arrivals are Poisson rather than constant
BATCH_CV = 1.2  # inter-arrival CV from which Poisson arrivals come in batches
MAX_BATCH = 1000.0
FEW_BATCHES = 10  # spread batches seen fewer times than this come at constant intervals
QD_PERCENTILE = 90
SKIP_SHARE = 0.3  # IOs a skip must place (share of the stream) to be learned
# ...or, for IOs just after the one before (within NEAR_BYTES), this share and this many
# times what chance over the stream's extent gives
NEAR_BYTES = 64 << 10
NEAR_SHARE = 0.03
NEAR_OVER_CHANCE = 20
# A file's fsync: sync writes of one process family dispatched back to back (the kernel's
# plug of the file's dirty pages). PostgreSQL's checkpointer fsyncs a data file: runs of 31-32
# 8 KiB writes 130 ns apart, then one flush; its WAL writes come one at a time.
FILESYNC_RUN = 4
FILESYNC_GAP_NS = 1_000
# Batched IOs closer than this came to the device together: the engine makes them due at
# once (one submission, dispatched back to back) rather than timing gaps it cannot time.
AT_ONCE_S = 1e-6


@dataclass
class StreamModel:
    """One learned stream, in profile terms."""

    name: str
    comm: str
    kind: str  # read | scan | log | syncwrite | writeback | journal
    ios: int
    rate_iops: float
    read_pct: float
    sizes: list[tuple[int, float]]  # (bytes, share)
    sequential_pct: float  # IOs placed after their predecessor (contiguous or by `skip`)
    pattern: str = "uniform"
    skip: tuple[int, int] | None = None
    area: int = 0  # index of the area it shares a region in
    sync: str = "none"
    fua_share: float = 0.0
    sync_share: float = 0.0
    flushes: int = 0
    runs: int = 0  # filesync: the runs of writes dispatched together (one fsync each)
    rounds_iops: float | None = None  # a group-commit log: the trace's writes a second
    qd: int | None = None
    arrival: str = "poisson"
    batch: float = 1.0  # mean IOs per batch of arrivals
    batch_gap_s: float = 0.0  # mean gap between the IOs of a batch (0: at once)
    writeback: bool = False  # async (page-cache) writes
    interarrival_cv: float = 1.0
    pids: int = 1
    latency_p99_ms: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def random_pct(self) -> float:
        return 0.0 if self.pattern == "sequential" else round(100.0 - self.sequential_pct, 1)


@dataclass
class Area:
    """A region of the profile shared by streams that touch the same data."""

    streams: list[str]
    length: int  # bytes
    touched: int  # distinct 64 KiB blocks the trace touched there
    first: int = 0  # lowest offset of its IOs in the trace
    position: int = 0  # where it starts in the profile's capacity (bytes, whole MiB)


@dataclass
class Model:
    """Streams and areas of one trace (or several end to end)."""

    streams: list[StreamModel]
    areas: list[Area]
    span_s: float
    ios: int
    flushes_unassigned: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def rate_iops(self) -> float:
        return sum(s.rate_iops for s in self.streams)


def family(comm: str) -> str:
    """A process family: the comm without worker numbers or a device suffix."""
    base = re.split(r"[/:]", comm or "", maxsplit=1)[0]
    base = re.sub(r"[-_.]\d+$", "", base)
    base = re.sub(r"[^A-Za-z0-9_]", "_", base).strip("_").lower()
    return base or "unknown"


def families(comms: np.ndarray) -> np.ndarray:
    """family() of every comm (an object array), each distinct comm worked out once."""
    if len(comms) == 0:
        return np.empty(0, dtype=object)
    distinct, index = np.unique(comms, return_inverse=True)
    return np.array([family(c) for c in distinct], dtype=object)[index.reshape(-1)]


def _kind_of(cols: Columns, fam: np.ndarray) -> np.ndarray:
    ops, sync, fua = cols.op, cols.sync, cols.fua
    kind = np.where(ops == "read", "read", np.where(sync | fua, "syncwrite", "writeback"))
    kind = np.where((fam == "jbd2") & (ops == "write"), "journal", kind).astype(object)
    kind[_filesync_writes(cols, fam, kind)] = "filesync"
    return kind


def _filesync_writes(cols: Columns, fam: np.ndarray, kind: np.ndarray) -> np.ndarray:
    """Sync writes a file's fsync wrote back (module doc): runs of FILESYNC_RUN or more of a
    family's sync writes, each dispatched within FILESYNC_GAP_NS of the one before, that are
    not one contiguous write the block layer split."""
    out = np.zeros(len(kind), dtype=bool)
    for f in np.unique(fam[kind == "syncwrite"]):
        idx = np.flatnonzero((kind == "syncwrite") & (fam == f))  # in issue order
        if len(idx) < FILESYNC_RUN:
            continue
        close = np.diff(cols.issue[idx]) <= FILESYNC_GAP_NS
        touching = cols.offset[idx[1:]] == cols.offset[idx[:-1]] + cols.size[idx[:-1]]
        # runs of consecutive close gaps: [start, end) over idx
        edges = np.flatnonzero(np.diff(np.concatenate(([0], close.astype(np.int8), [0]))))
        for a, b in zip(edges[::2], edges[1::2], strict=True):
            if b - a + 1 >= FILESYNC_RUN and not touching[a:b].all():
                out[idx[a : b + 1]] = True
    return out


def _skip(offsets: np.ndarray, sizes: np.ndarray) -> tuple[tuple[int, int] | None, float]:
    """How the stream's IOs that follow their predecessor do so: (the engine's skip, their
    share in %). A log rewriting its last page (PostgreSQL's WAL: 96% of writes start 8 KiB
    before the previous end) gets a constant negative skip; a sorted sweep (its checkpointer:
    94% start 16 KiB to 4 MiB after) a log-uniform range over the 5th to 95th percentile of
    those gaps; else (None, contiguous share)."""
    if len(offsets) < 2:
        return None, 0.0
    gap = offsets[1:] - (offsets[:-1] + sizes[:-1])
    zero = float((gap == 0).mean())
    back = (gap < 0) & (gap >= -(64 << 10))
    fwd = (gap > 0) & (gap <= (16 << 20))
    if back.mean() >= SKIP_SHARE and back.mean() > zero:
        v = int(np.median(gap[back]))
        v = -max(int(round(-v / placement.ALIGN)), 1) * placement.ALIGN
        return (v, v), float(100 * back.mean())
    if fwd.mean() >= SKIP_SHARE and fwd.mean() > zero:
        lo, hi = (int(x) for x in np.percentile(gap[fwd], [5, 95]))
        lo = max(lo // placement.ALIGN, 1) * placement.ALIGN
        hi = max(hi // placement.ALIGN * placement.ALIGN, lo)
        return (lo, hi), float(100 * fwd.mean())
    # A random stream some of whose IOs land just after the one before (PostgreSQL's reads:
    # 11% start 8 to 64 KiB after the previous read's end, pages near each other, where
    # chance over its 290 MiB gives 0.02%): that share follows by such a skip, the rest is
    # random. Not where the contiguous share is larger (a sequential stream keeps it).
    near = (gap > 0) & (gap <= NEAR_BYTES)
    extent = int((offsets + sizes).max() - offsets.min())
    chance = NEAR_BYTES / max(extent, 1)
    if (
        near.mean() >= NEAR_SHARE
        and near.mean() >= NEAR_OVER_CHANCE * chance
        and near.mean() > zero
    ):
        lo, hi = (int(x) for x in np.percentile(gap[near], [5, 95]))
        lo = max(lo // placement.ALIGN, 1) * placement.ALIGN
        hi = max(hi // placement.ALIGN * placement.ALIGN, lo)
        return (lo, hi), float(100 * near.mean())
    return None, 100 * zero


def _size_mix(sizes: np.ndarray) -> list[tuple[int, float]]:
    """The stream's sizes: up to MAX_SIZES that have MIN_SIZE_SHARE of its IOs each, and the
    others' IOs shared between the kept sizes around them so that both the IOs and their
    bytes stay (a size below the smallest kept one joins it). The sizes above the largest
    kept one become one more size, the one of them nearest their mean: RocksDB's compaction
    writes come in many sizes, each rare, and carry much of its bytes (joined to the nearest
    kept size on a log scale, 4-64 KiB IOs with rare ones of 256 KiB-4 MiB kept a fifteenth
    of their bytes: tests/test_learn.py)."""
    values, counts = np.unique(sizes, return_counts=True)
    order = np.argsort(counts)[::-1]
    total = counts.sum()
    kept = sorted(int(values[i]) for i in order[:MAX_SIZES] if counts[i] / total >= MIN_SIZE_SHARE)
    if not kept:
        kept = [int(values[order[0]])]
    weight = dict.fromkeys(kept, 0.0)
    tail: list[tuple[int, int]] = []
    for v, c in zip(values.tolist(), counts.tolist(), strict=True):
        share = c / total
        j = bisect.bisect_left(kept, v)
        if j < len(kept) and kept[j] == v:
            weight[v] += share
        elif j == 0:
            weight[kept[0]] += share
        elif j == len(kept):
            tail.append((v, c))
        else:
            lo, hi = kept[j - 1], kept[j]
            weight[lo] += share * (hi - v) / (hi - lo)
            weight[hi] += share * (v - lo) / (hi - lo)
    if tail:
        # one size the trace has (size mix compares exact sizes), the nearest to their mean
        n = sum(c for _, c in tail)
        mean = sum(v * c for v, c in tail) / n
        size = min((v for v, _ in tail), key=lambda v: abs(v - mean))
        weight[size] = weight.get(size, 0.0) + n / total
    return sorted(((s, w) for s, w in weight.items() if w > 0), key=lambda sw: -sw[1])


def _in_flight(issue: np.ndarray, complete: np.ndarray) -> np.ndarray:
    """IOs of these (issue-ordered) requests in flight as each is issued, itself included."""
    done = np.searchsorted(np.sort(complete), issue.astype(np.float64), side="right")
    return np.arange(1, len(issue) + 1) - done


def _cv(values: np.ndarray) -> float:
    if len(values) < 2 or values.mean() <= 0:
        return 1.0
    return float(values.std() / values.mean())


def _hyperexponential(gaps: np.ndarray) -> tuple[float, float] | None:
    """Bursty gaps (seconds) as batches whose IOs come apart: (batch, batch_gap_s), or None
    when two exponentials do not tell bursts from pauses.

    The gaps are fitted as a mixture of two exponentials (EM, from a split at the mean): a
    share q of short gaps of mean g1 (inside a batch) and the rest of mean g2 (between
    batches). That is the engine's spread batches exactly: geometric batches of mean
    1 / (1 - q), their IOs g1 apart, and the gap after a batch's last IO g2 on average, which
    the engine derives from the rate (EM keeps the mean: q g1 + (1 - q) g2 = the mean gap).
    Batches due at once (the CV moment match) put PostgreSQL's checkpointer's 99 writes on the
    device in one instant, where the trace has them a millisecond or so apart: on a serial
    device every read and commit arriving behind such a batch waited for all of it, and two
    tiles' commits for 50-70 ms where two instances' waited about 20 (docs/learn.md).
    """
    gaps = gaps[np.isfinite(gaps)]
    mean = float(gaps.mean()) if len(gaps) else 0.0
    if len(gaps) < MIN_STREAM_IOS or mean <= 0:
        return None
    short = gaps < mean
    q = float(short.mean())
    if not 0 < q < 1:
        return None
    g1 = max(float(gaps[short].mean()), mean * 1e-6)
    g2 = float(gaps[~short].mean())
    for _ in range(200):
        # responsibilities of the short component, in logs for the long pauses' sake
        l1 = math.log(q / g1) - gaps / g1
        l2 = math.log((1 - q) / g2) - gaps / g2
        r = 1.0 / (1.0 + np.exp(np.clip(l2 - l1, -700, 700)))
        q_new = float(r.mean())
        if not 1e-9 < q_new < 1 - 1e-9:
            return None
        g1_new = max(float((r * gaps).sum() / r.sum()), mean * 1e-6)
        g2_new = float(((1 - r) * gaps).sum() / (1 - r).sum())
        done = abs(q_new - q) < 1e-7 and abs(g1_new - g1) <= 1e-7 * g1
        q, g1, g2 = q_new, g1_new, g2_new
        if done:
            break
    if g2 <= g1 * 2:
        return None  # one exponential: no bursts to spread
    batch = 1.0 / (1.0 - q)
    if batch <= 1.01:
        return None
    # IOs closer than a microsecond reached the device together (a plug dispatched): due at
    # once, they go to the kernel in one submission and reach the device back to back too
    gap = 0.0 if g1 < AT_ONCE_S else float(f"{g1:.3g}")
    return round(min(batch, MAX_BATCH), 2), gap


def _name(fam: str, kind: str, seq_pct: float) -> str:
    if kind == "read" and seq_pct >= 50:
        kind = "scan"
    if kind == "syncwrite" and seq_pct >= 50:
        kind = "log"
    return f"{fam}_{kind}"[:64]


def _fit_stream(
    cols: Columns, mask: np.ndarray, fam_k: str, kind_k: str, span_s: float
) -> StreamModel:
    """One stream's parameters from its IOs (the module doc and docs/learn.md)."""
    offs, szs = cols.offset[mask], cols.size[mask]
    writes = cols.op[mask] == "write"
    skip, seq = _skip(offs, szs)
    issue = cols.issue[mask]
    gaps = np.diff(issue).astype(np.float64)
    m = StreamModel(
        name=_name(fam_k, kind_k, seq),
        comm=fam_k,
        kind=kind_k,
        ios=int(mask.sum()),
        rate_iops=float(mask.sum() / span_s),
        read_pct=float(100.0 * (1 - writes.mean())),
        sizes=_size_mix(szs),
        sequential_pct=seq,
        skip=skip,
        sync_share=float(cols.sync[mask][writes].mean()) if writes.any() else 0.0,
        fua_share=float(cols.fua[mask][writes].mean()) if writes.any() else 0.0,
        interarrival_cv=_cv(gaps),
        pids=len(set(cols.pid[mask].tolist())),
    )
    m.arrival = "poisson" if m.interarrival_cv >= POISSON_CV else "constant"
    if m.interarrival_cv >= BATCH_CV:
        spread = _hyperexponential(gaps / 1e9)
        if spread is not None:
            m.batch, m.batch_gap_s = spread
            seen = m.ios / m.batch
            if seen < FEW_BATCHES:
                # A few large batches (RocksDB's memtable flushes and compactions: one batch
                # of 65 writes of up to 1.3 MiB in 20 s): with Poisson pauses a run as long as
                # the trace has none in exp(-batches) of its windows (37% for one), and its
                # bytes with them; at constant intervals it has the trace's count
                m.arrival = "constant"
                m.notes.append(
                    f"about {seen:.1f} batches in the trace: at constant intervals, "
                    f"{span_s / seen:.3g} s apart (Poisson pauses would leave "
                    f"{math.exp(-seen):.0%} of the trace-long windows without one)"
                )
        else:
            # geometric batches at Poisson gaps: CV^2 = 2 * batch - 1
            m.batch = round(min((m.interarrival_cv**2 + 1) / 2, MAX_BATCH), 2)
    m.writeback = kind_k == "writeback"
    if kind_k == "filesync":
        m.runs = 1 + int((gaps > FILESYNC_GAP_NS).sum())
    comp = cols.complete[mask]
    finite = np.isfinite(comp)
    if finite.sum() >= MIN_STREAM_IOS:
        flight = _in_flight(issue[finite], comp[finite])
        # the 90th percentile: a stream's own concurrency (PostgreSQL's backends: 1 to 3
        # reads in flight, each waiting for its last) rather than its rare pile-ups
        m.qd = max(1, int(math.ceil(np.percentile(flight, QD_PERCENTILE))))
        if kind_k == "syncwrite" and m.pids > m.qd:
            # group commit: a database writes its log one write at a time, but every
            # process that writes it can be waiting for its commit, and a write that comes
            # due while one is in flight is served with it, not after it. At the traced load
            # the device saw one at a time; as the device slows, PostgreSQL's sessions wait
            # side by side and the WAL does not fall behind, where a stream at qd 1 would
            # (each write and its fdatasync after the previous pair, the backlog growing)
            m.notes.append(
                f"qd {m.pids} (its {m.pids} writing processes) rather than the {m.qd} in "
                "flight at the device: commits waiting together, as a database groups them"
            )
            m.qd = m.pids
        lat = (comp[finite] - issue[finite]) / 1e6
        m.latency_p99_ms = float(np.percentile(lat, 99))
    if m.sequential_pct >= SEQUENTIAL_PCT:
        m.pattern = "sequential"
    return m


def build(cols: Columns, *, compact: bool = False, max_capacity: int | None = None) -> Model:
    """Split the IOs into streams and fit each stream (module doc)."""
    data = cols.data
    fam = families(cols.comm)
    kind = _kind_of(cols, fam)
    keys = np.where(data, fam + "|" + kind, "")
    uniq, counts = np.unique(keys[data], return_counts=True)
    sizes_by_key = dict(zip(uniq.tolist(), counts.tolist(), strict=True))
    # small keys join the largest of the same kind, else the largest overall
    largest = max(sizes_by_key, key=lambda k: sizes_by_key[k])
    merged: dict[str, str] = {}
    for key, n in sizes_by_key.items():
        if n >= MIN_STREAM_IOS:
            merged[key] = key
            continue
        fam_k, kind_k = key.split("|")
        if kind_k == "filesync":
            kind_k = "syncwrite"  # a few fsynced writes join their family's sync writes
            if sizes_by_key.get(f"{fam_k}|syncwrite", 0) >= MIN_STREAM_IOS:
                merged[key] = f"{fam_k}|syncwrite"
                continue
        same = [k for k in sizes_by_key if k.split("|")[1] == kind_k]
        big = max(same or [key], key=lambda k: sizes_by_key[k])
        merged[key] = big if sizes_by_key[big] >= MIN_STREAM_IOS else largest
    stream_of = np.array([merged.get(k, "") for k in keys], dtype=object)
    span_s = cols.span_ns / 1e9
    streams: dict[str, StreamModel] = {}
    masks: dict[str, np.ndarray] = {}
    observed: dict[str, placement.Observed] = {}
    for key in sorted(set(merged.values()), key=lambda k: -sizes_by_key[k]):
        mask = stream_of == key
        fam_k, kind_k = key.split("|")
        m = _fit_stream(cols, mask, fam_k, kind_k, span_s)
        name = m.name
        i = 2
        while name in streams:
            name, i = f"{m.name}{i}", i + 1
        m.name = name
        streams[name] = m
        masks[name] = mask
        offs, szs = cols.offset[mask], cols.size[mask]
        observed[name] = placement.Observed(offs, szs, m.random_pct, skip=m.skip)
    model = Model(list(streams.values()), [], span_s, int(data.sum()))
    _assign_flushes(model, cols, fam, masks)
    _areas(model, observed, cols, compact, max_capacity)
    return model


def _assign_flushes(
    model: Model, cols: Columns, fam: np.ndarray, masks: dict[str, np.ndarray]
) -> None:
    """Flushes to the stream of sync writes of their process family, else the largest."""
    is_flush = cols.op == "flush"
    if not is_flush.any():
        return
    writers = [s for s in model.streams if s.read_pct < 100]
    if not writers:
        model.flushes_unassigned = int(is_flush.sum())
        model.notes.append(
            f"{model.flushes_unassigned} flushes left out: the trace has no writes to carry them"
        )
        return
    # A stream carries sync writes by its kind, or because a family's few sync writes (below
    # MIN_STREAM_IOS) joined one of its other streams: its flushes still follow them there.
    syncers = [
        s for s in writers if s.kind in ("syncwrite", "journal", "filesync") or s.sync_share > 0
    ] or writers
    for f, n in zip(*np.unique(fam[is_flush], return_counts=True), strict=True):
        # a family without sync writes of its own (the kernel's flush machinery issues
        # flushes from kworker on this machine) gives its flushes to every sync writer
        own = [s for s in syncers if s.comm == f] or syncers
        n = int(n)
        # a file's fsync flushes once after its run of writes; the other flushes follow the
        # other sync writes (a log's)
        for fs in (s for s in own if s.kind == "filesync"):
            take = min(n, fs.runs - fs.flushes)
            fs.flushes += take
            n -= take
        rest = [s for s in own if s.kind != "filesync"] or own
        max(rest, key=lambda s: s.ios).flushes += n
    for s in writers:
        if s.flushes:
            writes = s.ios * (1 - s.read_pct / 100)
            every = max(1, int(round(writes / s.flushes)))
            s.sync = f"fdatasync:{every}"
            if every == 1 and s.kind == "syncwrite" and s.pattern == "sequential":
                # A log flushed after each write: a database's commits. As the device slows,
                # the commits waiting for one flush are served by the next write and flush
                # together (group commit), where a write and flush per commit falls behind
                # (docs/learn.md: the 60 tps study).
                s.sync = "fdatasync:group"
                s.notes = [n for n in s.notes if "writing processes" not in n]
                s.notes.append(
                    "fdatasync:group: commits due while a write and its flush are in flight "
                    "join the next write and flush, as a database's log does"
                )
                _commits(s, cols, masks[s.name])
            if s.fua_share >= 0.5:
                s.notes.append(
                    f"{s.fua_share:.0%} of its writes are FUA, written as fdatasync:{every} (one "
                    "sync mode per stream)"
                )
        elif s.fua_share >= 0.5:
            s.sync = "dsync"


def _commits(s: StreamModel, cols: Columns, mask: np.ndarray) -> None:
    """A group-commit log learned as its commits where its rounds were grouped (commits.py)."""
    got = commits.fit(cols, mask, rounds=s.rate_iops, pids=s.pids, min_ios=MIN_STREAM_IOS)
    if got.note:
        s.notes.append(got.note)
    if got.commits is None:
        return
    s.sizes = commits.commit_sizes(s.sizes, s.skip, s.rate_iops / got.commits)
    s.rounds_iops, s.rate_iops = s.rate_iops, got.commits
    s.arrival, s.batch, s.batch_gap_s = "poisson", 1.0, 0.0


def _areas(
    model: Model,
    observed: dict[str, placement.Observed],
    cols: Columns,
    compact: bool,
    max_capacity: int | None,
) -> None:
    """Group streams touching the same 1 MiB regions into areas and fit each area's size."""
    regions = {
        n: set(np.unique(o.offsets // placement.REGION).tolist()) for n, o in observed.items()
    }
    names = list(observed)
    parent = {n: n for n in names}

    def root(n: str) -> str:
        while parent[n] != n:
            n = parent[n]
        return n

    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            small = min(len(regions[a]), len(regions[b]))
            if small and len(regions[a] & regions[b]) / small >= 0.5:
                parent[root(b)] = root(a)
    groups: dict[str, list[str]] = {}
    for n in names:
        groups.setdefault(root(n), []).append(n)
    by_name = {s.name: s for s in model.streams}
    extents = []
    for members in groups.values():
        obs = [observed[n] for n in members]
        ends = max(int((o.offsets + o.sizes).max()) for o in obs)
        extents.append(ends - min(int(o.offsets.min()) for o in obs))
    # With --max-capacity the areas are fitted within it: each searched up to its share of
    # the room rather than its whole extent (RocksDB's files spread over a whole filesystem
    # made areas as large as the device it was traced on, and no profile of it fitted there)
    scale = 1.0
    if max_capacity is not None and sum(extents) > max_capacity:
        scale = max_capacity / sum(extents)
        model.notes.append(
            f"areas fitted within --max-capacity: each at most {scale:.0%} of the extent its "
            "IOs spanned"
        )
    for index, members in enumerate(groups.values()):
        obs = [observed[n] for n in members]
        offs = np.concatenate([o.offsets for o in obs])
        length = placement.fit_area(obs, int(extents[index] * scale))
        touched = len(placement.touched_blocks(offs, np.concatenate([o.sizes for o in obs])))
        model.areas.append(Area(members, length, touched, first=int(offs.min())))
        for n, o in zip(members, obs, strict=True):
            by_name[n].pattern = o.pattern
            by_name[n].area = index
    _position(model, compact, max_capacity)


def _position(model: Model, compact: bool, max_capacity: int | None = None) -> None:
    """Areas in the order and at the distances they have on the traced device, so the jumps
    between streams (a backend's read after a WAL write) are as long as the application's:
    area i starts where it started in the trace relative to the first, or right after the
    area before it when its fitted size would overlap."""
    order = sorted(model.areas, key=lambda a: a.first)
    base = order[0].first
    at = 0
    for a in order:
        wanted = 0 if compact else (a.first - base) // placement.REGION * placement.REGION
        a.position = max(wanted, at)
        at = a.position + a.length
    if max_capacity is not None and at > max_capacity:
        # the gaps between areas shrink in proportion until the whole fits (at least
        # end to end: the areas themselves keep their fitted sizes)
        sizes = sum(a.length for a in order)
        if sizes > max_capacity:
            # the gaps cannot make up for it: a profile larger than asked for would be
            # refused later, by a target that has no room for it
            need = -(-sizes // placement.REGION) * placement.REGION
            raise UsageError(
                f"--max-capacity {format_size(max_capacity)} is below the {format_size(sizes)} "
                f"the trace's {len(order)} area(s) take end to end at their fitted sizes; use "
                f"at least {format_size(need)}."
            )
        gaps = at - sizes
        factor = (max_capacity - sizes) / gaps if gaps else 0.0  # sizes fit: factor >= 0
        at = 0
        prev_end = None
        for a in order:
            gap = 0 if prev_end is None else a.position - prev_end
            prev_end = a.position + a.length
            a.position = at + int(gap * factor) // placement.REGION * placement.REGION
            at = a.position + a.length
        model.notes.append(
            f"the gaps between areas were shrunk to {factor:.0%} to fit --max-capacity"
        )


def capacity(model: Model) -> int:
    """Bytes a tile of the profile spans: the areas at their positions."""
    return max((a.position + a.length for a in model.areas), default=0)
