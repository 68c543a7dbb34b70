"""Helpers for end-to-end tests that drive the engine directly with real IO."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tilemark import engine
from tilemark.hist import Histogram

MiB = 1 << 20


def make_file(path: Path, size: int, *, seed: int = 1) -> Path:
    """A file of `size` bytes filled with random data (so reads never hit holes)."""
    with open(path, "wb") as f:
        f.truncate(size)
    engine.fill(str(path), 0, size, direct=True, seed=seed)
    return path


def stream(name: str = "s", **kw) -> dict:
    """A stream spec with sensible defaults (4 KiB random read, closed loop QD1) on one region
    of target 0 (`target`, `offset`, `length` set it)."""
    region = {
        "target": kw.pop("target", 0),
        "offset": kw.pop("offset", 0),
        "length": kw.pop("length", 8 * MiB),
    }
    s = {
        "name": name,
        "regions": [region],
        "read_pct": 100.0,
        "sizes": [[4096, 1.0]],
        "pattern": {"kind": "random"},
        "align": 4096,
        "qd": 1,
        "arrival": {"kind": "closed"},
        "seed": 1,
    }
    s.update(kw)
    return s


def open_loop(rate_iops: float, dist: str = "constant") -> dict:
    return {"kind": "open", "rate_iops": rate_iops, "dist": dist}


def plan(path: Path | str, streams: list[dict], **kw) -> dict:
    size = kw.pop("target_length", None) or os.path.getsize(path)
    p = {
        "backend": "uring",
        "threads": 2,
        "interval_ms": 1000,
        "warmup_ms": 0,
        "duration_ms": 2000,
        "targets": [{"path": str(path), "offset": 0, "length": size, "direct": True}],
        "streams": streams,
    }
    p.update(kw)
    return p


def run(p: dict, *, stop_after_s: float | None = None) -> tuple[list[dict], dict]:
    """Run a plan to the end; returns (snapshots, result)."""
    h = engine.start(p)
    snaps: list[dict] = []
    t0 = time.monotonic()
    while not h.wait(0.1):
        snaps += h.poll()
        if stop_after_s is not None and time.monotonic() - t0 > stop_after_s:
            h.stop()
    snaps += h.poll()
    return snaps, h.result()


def measured_s(result: dict) -> float:
    return (result["measure_end_ns"] - result["measure_start_ns"]) / 1e9


def hist(d: dict | None) -> Histogram:
    return Histogram.from_json(d)
