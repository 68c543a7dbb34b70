"""Where a learned stream's IOs land: its region size and its skew, fitted by simulation.

The engine places a stream's random IOs over the blocks of its region (uniform, zipf:THETA with
ranks scattered by a multiply-mod, or hotspot:IO/REGION) and continues the rest sequentially
(`random` %). What fidelity sees of that is the footprint (distinct 64 KiB blocks touched) and
the skew (share of IOs to the hottest 1% and 10% of the touched 1 MiB regions), both of which
depend on the region's size and on how many IOs fall in it. Neither has a closed form worth
trusting for short traces (a few thousand IOs over gigabytes touch every region once), so the
fit simulates the engine's placement with numpy for each candidate and keeps the one closest to
the trace: first the pattern at a first guess of the size, then the size (bisection: footprint
grows with the region), then the pattern again at that size.

Streams that touch the same 1 MiB regions in the trace (a database's reads and the writeback of
the same tables) share one area: one region size, each with its own pattern. Zipf ranks are
scattered the same way for equal region sizes, so two zipf streams there have the same hot
blocks, as reads and writes of hot pages do.
"""

from __future__ import annotations

import functools
from collections import OrderedDict
from dataclasses import dataclass
from functools import cached_property

import numpy as np

BLOCK = 64 << 10  # fidelity's footprint unit
REGION = 1 << 20  # fidelity's skew unit
ALIGN = 4096  # the engine's default placement unit (O_DIRECT alignment, at least 4 KiB)
HOT = (0.01, 0.10)
# Simulated IOs per stream: beyond this the shares no longer move, only the cost grows.
MAX_SIM = 400_000
ZIPF_THETAS = (0.2, 0.4, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2, 1.4, 1.6, 2.0)
HOTSPOT_REGIONS = (1, 2, 5, 10, 20)
SIM_BUDGET = 256 << 20  # bytes of simulated offsets an area's fit keeps for reuse


@dataclass
class Observed:
    """One stream's IOs as placement sees them."""

    offsets: np.ndarray  # bytes, issue order
    sizes: np.ndarray
    random_pct: float
    pattern: str = "uniform"
    skip: tuple[int, int] | None = None  # bytes before a non-random IO (the engine's skip)

    @cached_property
    def shares(self) -> np.ndarray:
        """The trace's hot shares (what every candidate's simulation is compared with)."""
        return np.array(hot_shares(self.offsets))

    @cached_property
    def octaves(self) -> np.ndarray:
        """The trace's own seek-distance shares."""
        return seek_octaves(self.offsets, self.sizes)


class _Recent:
    """The most recently used values up to a byte budget (numpy arrays). The fit asks for the
    same simulation many times over (a candidate's footprint, then its skew; the other
    streams of an area while one stream's pattern is tried) and the same zipf CDF for every
    stream and seed at one region size: computing each once made `tilemark learn` of a
    6-second PostgreSQL trace several times faster."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.used = 0
        self.items: OrderedDict[tuple, np.ndarray] = OrderedDict()

    def get(self, key: tuple) -> np.ndarray | None:
        value = self.items.get(key)
        if value is not None:
            self.items.move_to_end(key)
        return value

    def put(self, key: tuple, value: np.ndarray) -> np.ndarray:
        if value.nbytes > self.budget:
            return value
        self.items[key] = value
        self.used += value.nbytes
        while self.used > self.budget:
            _, old = self.items.popitem(last=False)
            self.used -= old.nbytes
        return value


_ZIPF_CDFS = _Recent(128 << 20)


@functools.lru_cache(maxsize=256)
def _coprime(n: int) -> int:
    if n <= 2:
        return 1
    m = max(0x9E3779B97F4A7C15 % n, 2)
    while np.gcd(m, n) != 1:
        m += 1
        if m >= n:
            m = 2
    return m


def hot_shares(offsets: np.ndarray) -> tuple[float, float]:
    """Share of IOs to the hottest 1% and 10% of the touched 1 MiB regions (fidelity's skew)."""
    if len(offsets) == 0:
        return 0.0, 0.0
    counts = np.sort(_counts(offsets // REGION))[::-1]
    total = counts.sum()
    out = []
    for share in HOT:
        top = max(1, int(round(len(counts) * share)))
        out.append(float(counts[:top].sum() / total))
    return out[0], out[1]


def _counts(keys: np.ndarray) -> np.ndarray:
    """How often each distinct value of `keys` occurs (in no particular order): a bincount
    over their range where it is small (a region's blocks), np.unique (a sort) otherwise."""
    lo, hi = int(keys.min()), int(keys.max())
    if hi - lo > 4 * len(keys) + (1 << 16):
        return np.unique(keys, return_counts=True)[1]
    counts = np.bincount(keys - lo)
    return counts[counts > 0]


def count_blocks(offsets: np.ndarray, sizes: np.ndarray) -> int:
    """len(touched_blocks(offsets, sizes)), without listing them where their range is small:
    each IO adds 1 at its first block and takes 1 after its last, and a block is touched
    where the running sum is above 0."""
    if len(offsets) == 0:
        return 0
    first = offsets // BLOCK
    last = (offsets + np.maximum(sizes, 1) - 1) // BLOCK
    lo, hi = int(first.min()), int(last.max())
    if hi - lo > 4 * len(offsets) + (1 << 16):
        return len(touched_blocks(offsets, sizes))
    width = hi - lo + 2
    edges = np.bincount(first - lo, minlength=width) - np.bincount(last - lo + 1, minlength=width)
    return int(np.count_nonzero(np.cumsum(edges)))


def touched_blocks(offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """The distinct 64 KiB blocks covered by the IOs."""
    if len(offsets) == 0:
        return np.empty(0, dtype=np.int64)
    first = offsets // BLOCK
    last = (offsets + np.maximum(sizes, 1) - 1) // BLOCK
    extra = last - first
    if not extra.any():
        return np.unique(first)
    spans = [first] + [first + k for k in range(1, int(extra.max()) + 1)]
    allb = np.concatenate([s[s <= last] for s in spans])
    return np.unique(allb)


def _zipf_cdf(theta: float, blocks: int) -> np.ndarray:
    """The cumulative zipf weights of ranks 1..blocks. One array per theta serves every region
    size (the CDF of fewer blocks is a prefix of it): when a larger one is asked for it grows
    to at least twice its size (the fit asks for a few blocks more at a time), accumulating
    on from its last value, which gives the same numbers as computing it whole (np.cumsum
    adds in order)."""
    have = _ZIPF_CDFS.get((theta,))
    if have is not None and len(have) >= blocks:
        return have[:blocks]
    start = 0 if have is None else len(have)
    grown = max(blocks, 2 * start)
    weights = np.arange(start + 1, grown + 1, dtype=np.float64) ** -theta
    if have is None:
        cdf = np.cumsum(weights)
    else:
        cdf = np.concatenate((have, np.cumsum(np.concatenate(([have[-1]], weights)))[1:]))
    cdf.flags.writeable = False
    _ZIPF_CDFS.put((theta,), cdf)
    return cdf[:blocks]


def _random_blocks(pattern: str, blocks: int, n: int, rng: np.random.Generator) -> np.ndarray:
    if pattern.startswith("zipf:"):
        theta = float(pattern.split(":")[1])
        cdf = _zipf_cdf(theta, blocks)
        ranks = np.searchsorted(cdf, rng.random(n) * cdf[-1])
        return (ranks.astype(np.int64) * _coprime(blocks)) % blocks
    if pattern.startswith("hotspot:"):
        io_pct, region_pct = (float(x) for x in pattern.split(":")[1].split("/"))
        hot = min(max(int(blocks * region_pct / 100.0), 1), blocks)
        in_hot = rng.random(n) < io_pct / 100.0
        out = hot + rng.integers(0, max(blocks - hot, 1), n)
        out[in_hot] = rng.integers(0, hot, int(in_hot.sum()))
        return np.minimum(out, blocks - 1)
    return rng.integers(0, blocks, n)


def skips(skip: tuple[int, int] | None, n: int, rng: np.random.Generator) -> np.ndarray:
    """The engine's skip before each of n sequential IOs (stream.rs skip_bytes)."""
    if skip is None:
        return np.zeros(n, dtype=np.int64)
    lo, hi = abs(skip[0]), abs(skip[1])
    mag = np.full(n, float(lo)) if lo == hi else np.exp(rng.uniform(np.log(lo), np.log(hi), n))
    aligned = np.maximum(np.round(mag / ALIGN), 1).astype(np.int64) * ALIGN
    return -aligned if skip[0] < 0 else aligned


def simulate(
    pattern: str,
    random_pct: float,
    sizes: np.ndarray,
    length: int,
    seed: int = 1,
    skip: tuple[int, int] | None = None,
) -> np.ndarray:
    """Offsets (relative to the region) the engine would give these IOs in a region of
    `length` bytes: random ones by `pattern`, the rest `skip` after the previous IO's end
    (wrapping)."""
    rng = np.random.default_rng(seed)
    n = len(sizes)
    largest = int(sizes.max()) if n else ALIGN
    blocks = max((length - largest) // ALIGN + 1, 1)
    starts = _random_blocks(pattern, blocks, n, rng) * ALIGN
    if random_pct >= 100:
        return starts
    is_random = rng.random(n) < random_pct / 100.0
    is_random[0] = True
    last = np.maximum.accumulate(np.where(is_random, np.arange(n), 0))
    step = np.zeros(n, dtype=np.int64)
    step[1:] = sizes[:-1] + skips(skip, n - 1, rng)
    walked = np.cumsum(step)
    run_bytes = walked - walked[last]  # bytes since the run's random start
    span = max(length - largest, ALIGN)
    return (starts[last] + run_bytes) % span


def _sample(sizes: np.ndarray) -> np.ndarray:
    if len(sizes) <= MAX_SIM:
        return sizes
    step = len(sizes) / MAX_SIM
    return sizes[(np.arange(MAX_SIM) * step).astype(np.int64)]


def fit_pattern(obs: Observed, length: int) -> str:
    """The pattern (uniform, zipf:THETA or hotspot:IO/REGION) whose simulated skew over a
    region of `length` bytes is closest to the stream's own."""
    if obs.random_pct <= 0:
        return "sequential"
    want = np.array(hot_shares(obs.offsets))
    sizes = _sample(obs.sizes)
    candidates = ["uniform"] + [f"zipf:{t:g}" for t in ZIPF_THETAS]
    best, best_err = "uniform", np.inf
    for cand in candidates:
        got = np.array(hot_shares(simulate(cand, obs.random_pct, sizes, length)))
        err = float(np.abs(got - want).sum())
        if err < best_err - 1e-9:
            best, best_err = cand, err
    for region in HOTSPOT_REGIONS:
        # hotspot's IO share: as many IOs in REGION% of the space as the trace's hottest share
        for io in (50, 60, 70, 80, 90, 95, 99):
            if io <= region:
                continue
            cand = f"hotspot:{io}/{region}"
            got = np.array(hot_shares(simulate(cand, obs.random_pct, sizes, length)))
            err = float(np.abs(got - want).sum())
            if err < best_err - 0.01:  # a simpler zipf or uniform wins ties
                best, best_err = cand, err
    return best


def _candidates() -> list[str]:
    out = ["uniform"] + [f"zipf:{t:g}" for t in ZIPF_THETAS]
    for region in HOTSPOT_REGIONS:
        out += [f"hotspot:{io}/{region}" for io in (50, 70, 90, 99) if io > region]
    return out


def _lengths(lo: int, hi: int, points: int = 28) -> list[int]:
    """Region sizes from lo to hi on a log scale, whole MiB. Searched rather than bisected:
    the engine scatters zipf ranks by a multiplier that depends on the block count, so the
    footprint and skew of a region do not grow smoothly with its size."""
    lo_m, hi_m = max(lo // REGION, 1), max(hi // REGION, 1)
    if hi_m <= lo_m:
        return [lo_m * REGION]
    ratio = max((hi_m / lo_m) ** (1 / (points - 1)), 1.02)
    out, x = [], float(lo_m)
    while x < hi_m:
        out.append(int(round(x)))
        x *= ratio
    out.append(hi_m)
    return [m * REGION for m in sorted(set(out))]


def seek_octaves(offsets: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Shares of a stream's own seek distances (from the previous IO's end) by signed octave,
    as fidelity bins them, over bins -52..52."""
    out = np.zeros(105)
    if len(offsets) < 2:
        return out
    gap = offsets[1:] - (offsets[:-1] + sizes[:-1])
    octave = np.floor(np.log2(np.maximum(np.abs(gap), 1))).astype(np.int64)
    bins = np.where(gap == 0, 0, np.sign(gap) * (np.minimum(octave, 51) + 1)) + 52
    counts = np.bincount(bins, minlength=105)
    return counts / counts.sum()


def _simulated(
    sims: _Recent | None, i: int, s: Observed, pattern: str, random_pct: float,
    sizes: np.ndarray, length: int,
) -> np.ndarray:  # fmt: skip
    """simulate() of stream i of an area, remembered in `sims` (the same stream, pattern and
    size are asked for again and again while the area is fitted)."""
    key = (i, pattern, random_pct, len(sizes), length)
    got = sims.get(key) if sims is not None else None
    if got is None:
        got = simulate(pattern, random_pct, sizes, length, seed=i + 1, skip=s.skip)
        if sims is not None:
            got.flags.writeable = False
            sims.put(key, got)
    return got


def _skew_error(streams: list[Observed], length: int, sims: _Recent | None = None) -> float:
    """IO-weighted mean over the streams of |simulated - trace| hot shares, plus the total
    variation of their own seek distances (how far apart a stream's IOs land is as much a
    property of its region's size as its footprint is)."""
    total = sum(len(s.sizes) for s in streams) or 1
    err = 0.0
    for i, s in enumerate(streams):
        if s.pattern == "sequential":
            continue
        sizes = _sample(s.sizes)
        sim = _simulated(sims, i, s, s.pattern, s.random_pct, sizes, length)
        got = np.array(hot_shares(sim))
        seeks = 0.5 * float(np.abs(s.octaves - seek_octaves(sim, sizes)).sum())
        err += len(s.sizes) / total * (float(np.abs(got - s.shares).mean()) + seeks)
    return err


def fit_area(streams: list[Observed], extent: int) -> int:
    """The region size (bytes, a multiple of 1 MiB) of an area shared by `streams`, and each
    stream's pattern (set on each Observed), fitted together: for every candidate pattern
    (all streams alike) the size whose simulated footprint matches the trace's, scored by
    footprint and skew error; then each stream's own pattern at the chosen size."""
    offsets = np.concatenate([s.offsets for s in streams])
    sizes = np.concatenate([s.sizes for s in streams])
    want = count_blocks(offsets, sizes)
    sims = _Recent(SIM_BUDGET)
    lo = max(want * BLOCK, REGION)
    hi = max(extent, lo)
    placed = [s for s in streams if s.random_pct > 0]
    for s in streams:
        if s.random_pct <= 0:
            s.pattern = "sequential"
    if not placed:
        return _bisect(streams, want, lo, hi)
    best: tuple[float, str, int] | None = None
    scored: list[tuple[float, str, int]] = []
    for length in _lengths(lo, hi):
        for cand in _candidates():
            for s in placed:
                s.pattern = cand
            foot = abs(_footprint(streams, length, sims) - want) / max(want, 1)
            if best is not None and foot >= best[0]:
                continue  # cannot win: the skew error only adds
            score = foot + _skew_error(streams, length, sims)
            scored.append((score, cand, length))
            if best is None or score < best[0] - 1e-9:
                best = (score, cand, length)
    # what a few IOs say about a large region is weak (thirty writes over a whole disk touch
    # thirty blocks at any size): among fits as good, within 0.02, the smallest region
    if best is not None:
        near = [x for x in scored if x[0] <= best[0] + 0.02]
        best = min(near, key=lambda x: (x[2], x[0]))
    assert best is not None
    _, cand, length = best
    for s in placed:
        s.pattern = cand
    if len(placed) > 1:  # then each stream's own pattern at that size, the others kept
        for s in placed:
            errors = {}
            for c in _candidates():
                s.pattern = c
                foot = abs(_footprint(streams, length, sims) - want) / max(want, 1)
                errors[c] = foot + _skew_error(streams, length, sims)
            s.pattern = min(errors, key=lambda c: (errors[c], c != cand))
    return length


def _footprint(streams: list[Observed], length: int, sims: _Recent | None = None) -> int:
    parts, sizes = [], []
    for i, s in enumerate(streams):
        if s.pattern == "sequential":
            parts.append(_simulated(sims, i, s, "uniform", 0.0, s.sizes, length))
        else:
            parts.append(_simulated(sims, i, s, s.pattern, s.random_pct, s.sizes, length))
        sizes.append(s.sizes)
    return count_blocks(np.concatenate(parts), np.concatenate(sizes))


def _bisect(streams: list[Observed], want: int, lo: int, hi: int) -> int:
    def mib(x: float) -> int:
        return max(int(round(x / REGION)), 1) * REGION

    # A skewed stream's footprint stops growing with the region (its hot blocks are touched
    # over and over wherever they are): the smallest region that gives 98% of it.
    want = int(0.98 * want)
    lo, hi = mib(lo), mib(hi)
    top = _footprint(streams, hi)
    if top < want:
        # No size reaches the trace's footprint (a log that also jumps to new files touches
        # more than its sequential model can): past the size that gives what the largest
        # gives, a region only adds capacity. Taking the largest had made PostgreSQL's WAL
        # area the whole extent between its segment files, 4.3 GiB for 60 MiB of WAL.
        want = int(0.98 * top)
    if _footprint(streams, lo) >= want:
        return lo
    for _ in range(14):
        if hi - lo <= REGION:
            break
        mid = mib((lo * hi) ** 0.5)  # sizes span orders of magnitude: bisect on a log scale
        if mid in (lo, hi):
            mid = mib((lo + hi) / 2)
        if _footprint(streams, mid) < want:
            lo = mid
        else:
            hi = mid
    return hi
