"""A block trace as an application of a tile: `[[app]] trace = "pg.parquet"` (docs/tiles.md).

A tile file may name a trace where it names a profile. The trace becomes an application of
one stream, `replay`, that replays the trace at its own times (open loop, as `tilemark
replay` does), again and again until the run ends, in the application's share of each tile:
N tiles are N copies of the application's real IO at disjoint offsets, so `tilemark scale`
answers "how many of these does the storage carry". `speed` replays it faster or slower.

The profile is built from a scan of the trace (read share, size mix, rate), so the layout,
the QoS and the reports treat it like any other application; its default QoS asks the
replay to keep the trace's pace (throughput >= 95%), and `[app.qos.ID]` tables add latency
criteria as for profiles. The IO lists are written when a run starts, one per region length
(every tile's share of a target is the same), remapped into the region with `modulo` as
`tilemark replay` does, and moved into the run directory with the plan naming them.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError

STREAM = "replay"  # the one stream of a trace application
DEFAULT_MIN_FRACTION = 0.95
APP_KEYS = ("trace", "name", "speed", "capacity_weight", "qos", "target", "host")


@dataclass(frozen=True)
class TraceSource:
    """The trace an application replays, and at what speed (the AppStream's `trace`)."""

    path: Path
    speed: float
    span_ns: int  # first to last IO at speed 1
    ios: int  # selected rows (reads, writes, flushes, discards)
    max_inflight: int
    max_len: int

    def loop_ns(self) -> int:
        """One pass at this speed: its span plus one mean gap, so the next pass keeps the
        rhythm (trace/replay.py does the same for --loop)."""
        span = self.span_ns / self.speed
        return max(1, round(span + span / max(1, self.ios - 1)))


def trace_profile(path: Path, speed: float, weight: float, label: str, qos: dict, where: str):
    """The Profile of a trace application (workload/apps.py Profile), from one scan of it."""
    from tilemark.trace import iolist
    from tilemark.trace.replay import inflight_cap
    from tilemark.trace.schema import TraceError, open_trace
    from tilemark.trace.selection import Selection
    from tilemark.workload import apps

    if not (isinstance(speed, int | float) and not isinstance(speed, bool) and 0 < speed <= 1e6):
        raise UsageError(f"{where}: speed must be a number above 0 (2 = twice as fast).")
    try:
        trace = open_trace(path)
        scan = iolist.scan(trace, Selection(), None, completions=False)
    except TraceError as e:
        raise UsageError(f"{where}: {e}") from None
    group = scan.groups.get(None)
    moved = 0 if group is None else group.ops["read"] + group.ops["write"]
    if group is None or moved < 2 or scan.span_ns <= 0:
        raise UsageError(
            f"{where}: trace {path} has {moved} reads and writes; a trace application needs at "
            "least 2, spread over some time."
        )
    sizes: dict[int, int] = {}
    for batch in iolist.batches(trace, Selection(), None):
        data = batch.size[(batch.op == iolist.READ) | (batch.op == iolist.WRITE)]
        for size, count in zip(*_unique(data), strict=True):
            sizes[int(size)] = sizes.get(int(size), 0) + int(count)
    source = TraceSource(
        path=path.resolve(),
        speed=float(speed),
        span_ns=scan.span_ns,
        ios=scan.selected,
        max_inflight=group.max_inflight,
        max_len=group.max_size,
    )
    iops = (moved - 1) / (scan.span_ns / 1e9) * speed
    read_pct = 100.0 * group.ops["read"] / moved
    table = {
        "rw": "randrw",
        "read": round(read_pct, 3),
        "bs": [[max(1, s), w] for s, w in iolist.size_mix(sizes)],
        "pattern": "uniform",
        "arrival": "constant",
    }
    stream = apps.AppStream(
        name=STREAM,
        region=(0.0, 1.0),
        copies=1,
        table=table,
        rate=iops,
        qd=inflight_cap(max(1, group.max_size), group.max_inflight),
        trace=source,
    )
    profile = apps.Profile(
        name=label,
        description=f"trace {path.name} replayed at its own times"
        + (f", speed {speed:g}" if speed != 1 else ""),
        kind="application",
        capacity_weight=float(weight),
        metric=f"iops('{STREAM}')",
        metric_unit="IOPS",
        scale={},
        streams=[stream],
        qos=[],
        path=str(path),
    )
    criteria = {"pace": {"stream": STREAM, "stat": "throughput",
                         "min_fraction": DEFAULT_MIN_FRACTION}}  # fmt: skip
    for cid, t in qos.items():
        criteria[cid] = {"stream": STREAM, **t}
    profile.qos = [apps._criterion(cid, t, profile, where) for cid, t in criteria.items()]
    return profile


def _unique(values: Any) -> tuple[Any, Any]:
    import numpy as np

    return np.unique(values, return_counts=True)


@dataclass
class TileLists:
    """The IO lists of one tile run's trace applications, written in `staging`."""

    staging: Path
    lists: dict[int, Path]  # plan stream index -> its list

    def move_into(self, run_dir: Path, plan: dict[str, Any]) -> None:
        """The run starts: the lists move into the run directory, where the plan names them."""
        target = run_dir / "replay"
        target.mkdir()
        moved: dict[Path, Path] = {}
        for index, path in self.lists.items():
            if path not in moved:
                moved[path] = target / path.name
                os.replace(path, moved[path])
            plan["streams"][index]["ios"]["path"] = str(moved[path].resolve())


def attach_lists(
    plan: dict[str, Any], sources: dict[int, TraceSource], results: Path
) -> TileLists | None:
    """Write the IO list of every trace stream of a compiled tile plan (`sources`: plan
    stream index -> its trace) into a staging directory in `results`, and name each in its
    stream as `ios` (timed, looping until the run ends). None when there are none."""
    if not sources:
        return None
    from tilemark.trace import iolist
    from tilemark.trace.schema import open_trace
    from tilemark.trace.selection import Selection

    staging = results / f".tiles-{os.getpid()}-{secrets.token_hex(3)}"
    staging.mkdir(parents=True)
    written: dict[tuple[Path, float, int, int], tuple[Path, int]] = {}
    lists: dict[int, Path] = {}
    try:
        for index, source in sources.items():
            stream = plan["streams"][index]
            (region,) = stream["regions"]
            align = int(stream["align"])
            key = (source.path, source.speed, int(region["length"]), align)
            if key not in written:
                if source.max_len + align > region["length"]:
                    raise UsageError(
                        f"trace {source.path} has IOs of {source.max_len:,} bytes, larger than "
                        f"its share of a tile ({region['length']:,} bytes); give a larger "
                        "--capacity."
                    )
                path = staging / f"{len(written)}.ios"
                trace = open_trace(source.path)
                scan = iolist.scan(trace, Selection(), None, completions=False)
                remap = iolist.Remap("modulo", int(region["length"]), align)
                (out,) = iolist.write_lists(
                    scan, Selection(), None, source.speed,
                    [iolist.ListPlan(None, path, remap, afap=False)],
                )  # fmt: skip
                written[key] = (path, out.records)
            path, records = written[key]
            lists[index] = path
            stream["ios"] = {
                "path": str(path),
                "count": records,
                "mode": "timed",
                "loop_ns": source.loop_ns(),
            }
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return TileLists(staging, lists)


@contextlib.contextmanager
def tile_lists(
    plan: dict[str, Any], sources: dict[int, TraceSource], results: Path
) -> Iterator[Callable[[Path, dict[str, Any]], None] | None]:
    """`attach_lists` for one run: yields run_plan's `before_start` (None without trace
    applications) and removes the staging directory afterwards."""
    lists = attach_lists(plan, sources, results)
    try:
        yield None if lists is None else lists.move_into
    finally:
        if lists is not None:
            shutil.rmtree(lists.staging, ignore_errors=True)
