"""A group-commit log's commits, learned from its rounds (docs/learn.md, group commit).

A database's log under group commit reaches the device as rounds: one write of the commits
waiting, then its flush. A block trace holds the rounds, already grouped; the engine's group
commit (worker/group.rs) takes commits and groups them itself. So a log whose rounds came
back to back is learned as the Poisson commit rate whose rounds, at the trace's round time,
come as often as the trace's writes (`round_rate` inverted), each commit writing its share of
a round's pages (`commit_sizes`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tilemark.learn import placement
from tilemark.learn.traces import Columns

# learn() inverts only where the log's rounds were grouped: this share of its writes issued
# within BACK_TO_BACK_NS of the flush before them completing...
GROUPED_SHARE = 0.1
BACK_TO_BACK_NS = 200_000
# ...and not where its rounds (a write and its flush) kept the device this busy, nor beyond
# this many commits to a round
ROUNDS_BUSY = 0.95
MAX_COMMITS_PER_ROUND = 8.0


def round_rate(commits: float, service_s: np.ndarray) -> float:
    """Rounds a second of a group-commit log whose commits arrive as a Poisson process,
    `commits` a second, each round (a write and its flush) taking one of `service_s` seconds.
    A round starts when the one before ends if a commit came meanwhile, else at the next
    commit: a round and the wait after it take E[S] + E[exp(-commits S)] / commits (the
    engine's worker/group.rs, at any load)."""
    return 1.0 / (float(service_s.mean()) + float(np.exp(-commits * service_s).mean()) / commits)


@dataclass(frozen=True)
class Fit:
    """A log's commits a second (None: its writes stay its rate) and what to note about it."""

    commits: float | None = None
    note: str | None = None


def fit(cols: Columns, mask: np.ndarray, *, rounds: float, pids: int, min_ios: int) -> Fit:
    """A group-commit log's arrivals are commits, not the device's writes (docs/learn.md,
    group commit): the trace's writes (`mask`, `rounds` a second) are the application's
    rounds, already grouped, and grouping them again at the traced load loses a third of the
    log's writes and flushes. So its rate becomes the Poisson commit rate whose rounds, each
    taking a write and its flush as long as the trace's did, come as often as the trace's
    writes (each commit then writes its share of a round's bytes: commit_sizes). A log whose
    rounds did not follow each other (each commit a round of its own), or that one process
    wrote, is left as it is."""
    if pids < 2:
        # one process commits one transaction at a time: nothing of its waits with another,
        # its writes back to back are its commits (SQLite's loop)
        return Fit()
    writes = np.flatnonzero(mask & (cols.op == "write") & np.isfinite(cols.complete))
    flushes = np.flatnonzero((cols.op == "flush") & np.isfinite(cols.complete))
    if len(writes) < min_ios or len(flushes) == 0:
        return Fit()
    # each write's round: to the completion of the first flush issued once it completed
    nxt = np.searchsorted(cols.issue[flushes], cols.complete[writes], side="left")
    ok = nxt < len(flushes)
    service = (cols.complete[flushes[nxt[ok]]] - cols.issue[writes[ok]]) / 1e9
    if len(service) < min_ios:
        return Fit()
    # Grouping shows as rounds back to back: the next write issued as soon as the flush
    # before it completed (a waiting session woken: PostgreSQL's 30-60 us), 71% of
    # PostgreSQL's rounds at 385 tps on a 1 ms device. Without it every commit had a round
    # of its own, and the writes are the commits.
    gap = cols.issue[writes[ok]][1:] - cols.complete[flushes[nxt[ok]]][:-1]
    back_to_back = float(((gap >= 0) & (gap <= BACK_TO_BACK_NS)).mean())
    if back_to_back < GROUPED_SHARE:
        return Fit()
    busy = rounds * float(service.mean())
    mean_ms = float(service.mean()) * 1e3
    if busy >= ROUNDS_BUSY:
        return Fit(
            note=f"its rounds (a write and its flush, {mean_ms:.3g} ms on average) kept the "
            f"device {busy:.0%} busy: the commits behind them cannot be told, the writes are "
            "its rate"
        )
    lo, hi = rounds, rounds * MAX_COMMITS_PER_ROUND
    capped = round_rate(hi, service) < rounds
    if not capped:
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if round_rate(mid, service) < rounds else (lo, mid)
    commits = hi
    return Fit(
        commits,
        f"{commits:.4g} commits a second (Poisson), {commits / rounds:.2f} to a round: "
        f"grouped while a write and its flush take {mean_ms:.3g} ms on average, as in the "
        f"trace, they give its {rounds:.4g} writes a second"
        + (f" (at most {MAX_COMMITS_PER_ROUND:g} to a round)" if capped else ""),
    )


def commit_sizes(
    rounds: list[tuple[int, float]], skip: tuple[int, int] | None, share: float
) -> list[tuple[int, float]]:
    """A group-commit log's commit sizes from its rounds' (size, weight), each commit `share`
    of a round: its advance past the page it rewrites (a constant negative `skip`) scaled.

    The log's own unit (PostgreSQL's 8 KiB WAL pages): its rounds are whole pages, and so are
    its commits' advances, each between the two whole numbers of pages around its scaled
    advance, weighted to keep the mean (rounding 8 KiB advances of 0.5 to 4 KiB lost a sixth
    of the bytes, and 4 KiB steps made rounds of sizes the trace never had). A log that does
    not rewrite its last page has no empty commit: advances below one page become one, and
    the scale shrinks until the mean is kept."""
    overlap = -skip[0] if skip is not None and skip[0] == skip[1] < 0 else 0
    unit = max(math.gcd(*(size for size, _ in rounds)), placement.ALIGN)
    least = 0 if overlap else 1

    def mix(scale: float) -> dict[int, float]:
        sizes: dict[int, float] = {}
        for size, w in rounds:
            units = max(max(size - overlap, 0) * scale / unit, least)
            low = math.floor(units)
            for n, part in ((low, 1 - (units - low)), (low + 1, units - low)):
                if part > 1e-9:
                    new = n * unit + overlap
                    sizes[new] = sizes.get(new, 0.0) + w * part
        return sizes

    def advance(sizes: dict[int, float]) -> float:
        return sum(w * (b - overlap) for b, w in sizes.items())

    target = share * sum(w * max(size - overlap, 0) for size, w in rounds)
    lo, hi = 0.0, share
    for _ in range(40):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if advance(mix(mid)) < target else (lo, mid)
    return sorted(((b, round(w, 6)) for b, w in mix(lo).items()), key=lambda sw: -sw[1])
