"""Where two captures' inter-arrival gaps differ: the gaps between consecutive issues of all
reads and writes, of the reads, of the sync writes and of the async (writeback) writes, in
coarse log bins, side by side, with the Kolmogorov-Smirnov distance of each (fidelity's
`interarrival` property is the first, over finer bins: docs/fidelity.md).

    .venv/bin/python bench/fid_gaps.py APP.parquet RUN.parquet

APP and RUN are tilemark traces (`tilemark trace capture`, or bench/fidelity.py --keep's
app.parquet and run-this-0.parquet). It prints a table per group; nothing is written.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow.parquet as pq

EDGES_NS = [0, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7, 1e8, 1e12]
LABELS = ["<1us", "1-10us", "10-30us", "30-100us", ".1-.3ms", ".3-1ms", "1-3ms", "3-10ms",
          "10-100ms", ">100ms"]  # fmt: skip


@dataclass(frozen=True)
class Capture:
    """The columns of a trace this needs, one entry per request."""

    issue_ns: np.ndarray
    op: np.ndarray
    sync: np.ndarray


def load(path: str) -> Capture:
    table = pq.read_table(path, columns=["issue_ns", "op", "sync"]).to_pydict()
    return Capture(**{k: np.asarray(v) for k, v in table.items()})


def shares(issue: np.ndarray) -> np.ndarray:
    """Share of the gaps between consecutive issues in each bin."""
    gaps = np.diff(np.sort(issue)).astype(np.float64)
    counts, _ = np.histogram(gaps, bins=EDGES_NS)
    return counts / max(int(counts.sum()), 1)


GROUPS: dict[str, Callable[[Capture], np.ndarray]] = {
    "reads and writes": lambda c: c.op != "flush",
    "reads": lambda c: c.op == "read",
    "sync writes": lambda c: (c.op == "write") & c.sync.astype(bool),
    "async writes": lambda c: (c.op == "write") & ~c.sync.astype(bool),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("app")
    ap.add_argument("run")
    args = ap.parse_args()
    app, run = load(args.app), load(args.run)
    for name, select in GROUPS.items():
        a, b = select(app), select(run)
        sa, sb = shares(app.issue_ns[a]), shares(run.issue_ns[b])
        ks = float(np.max(np.abs(np.cumsum(sa) - np.cumsum(sb))))
        print(f"{name}: {int(a.sum())} / {int(b.sum())} IOs; KS {ks:.3f}")
        print("     " + " ".join(f"{label:>9}" for label in LABELS))
        print("app  " + " ".join(f"{x:9.3f}" for x in sa))
        print("run  " + " ".join(f"{x:9.3f}" for x in sb))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
