"""Streams paced against each other (`flow`) and streams whose end stops others
(`on_end_stop`): fio's flow control and exitall (docs/engine-boundary.md `flow`, `on_end`);
and the check of a batch's spread (`batch_gap`, the end of this module).

    [[stream]]
    name = "log"
    rw = "write"
    flow = "pace:1"          # group pace, weight 1
    flow_sleep = "1ms"       # ahead of its share: wait for its IOs, 1 ms, then look again

    [[stream]]
    name = "reads"
    rw = "randread"
    flow = "pace:8"          # 8 reads for every write of log, on any engine thread
    flow_sleep = "1ms"

    [[stream]]
    name = "slow"
    rw = "read"
    io_size = "4m"
    on_end_stop = "fast"     # when slow ends, fast is stopped (every copy)
    on_end_only_started = true   # ... only streams running by then

The engine keeps one pair of shared counters per group (the IOs its streams issued, the sum
of their weights) and holds back a stream whose share of the IOs is above its share of the
weight: fio's flow.c rule. A stream's end asks the streams it names to stop, as `stop_streams`
does; a stream so stopped ends too, so the streams it names stop in turn (fio's exitall
applies to every job that exits).
"""

from __future__ import annotations

from typing import Any, Protocol

from tilemark.errors import UsageError


class StreamSpec(Protocol):
    """What this module reads of a stream (plan.StreamSpec; plan.py imports this module)."""

    name: str
    arrival: str
    after: list[str] | None
    start_s: float | None
    host: str | None
    flow: tuple[str, int] | None
    flow_sleep_s: float
    on_end_stop: list[str] | None
    on_end_only_started: bool
    stopped_by_others: bool

    def ends_by_itself(self) -> bool: ...

    def label(self, key: str) -> str: ...


def _base(name: str) -> str:
    return name.split("@")[0]


def stop_indices(streams: list[StreamSpec], index: int) -> list[int]:
    """Plan indices of the streams stream `index`'s end stops (a name covers its copies)."""
    names = streams[index].on_end_stop or []
    return [j for j, s in enumerate(streams) if s.name in names or _base(s.name) in names]


def check_pacing(streams: list[StreamSpec]) -> None:
    """flow on closed-loop streams placed on every host; on_end_stop names streams of the
    workload; batch_gap leaves room between batches. Marks the streams another stream's end
    surely stops (they end, for `after` and a run that lasts until every stream has ended).
    Raises UsageError."""
    for stream in streams:
        check_batch_gap(stream)
        if stream.flow is not None:
            if stream.arrival != "closed":
                raise UsageError(
                    f"{stream.label('flow')} paces closed-loop streams; a stream with a rate "
                    "has its own pace (drop the rate or the flow)."
                )
            if stream.host is not None:
                raise UsageError(
                    f"{stream.label('flow')} is not available for streams placed on one host."
                )
        elif stream.flow_sleep_s:
            raise UsageError(f"{stream.label('flow_sleep')} needs a flow (GROUP:WEIGHT).")
        if stream.on_end_stop is None:
            if stream.on_end_only_started:
                raise UsageError(f"{stream.label('on_end_only_started')} needs on_end_stop.")
            continue
        for name in stream.on_end_stop:
            if not any(name in (s.name, _base(s.name)) for s in streams):
                raise UsageError(
                    f"{stream.label('on_end_stop')} names {name!r}, which is not a stream of "
                    "this workload."
                )
        if stream.host is not None:
            raise UsageError(
                f"{stream.label('on_end_stop')} is not available for streams placed on one host."
            )
    _mark_stopped(streams)


def _mark_stopped(streams: list[StreamSpec]) -> None:
    """A stream is surely stopped by the end of a stream that ends when that one names it and
    stops every stream it names, or the stream starts with the run (so it has started)."""
    changed = True
    while changed:
        changed = False
        for i, stream in enumerate(streams):
            if not stream.on_end_stop or not stream.ends_by_itself():
                continue
            for j in stop_indices(streams, i):
                other = streams[j]
                starts_at_once = not other.after and not other.start_s
                sure = not stream.on_end_only_started or starts_at_once
                if j != i and sure and not other.ends_by_itself():
                    other.stopped_by_others = True
                    changed = True


def plan_fields(streams: list[StreamSpec], index: int) -> dict[str, Any]:
    """Stream `index`'s plan keys `flow` and `on_end` (only those it sets: plans without them
    read as before)."""
    stream = streams[index]
    out: dict[str, Any] = {}
    if stream.flow is not None:
        groups: list[str] = []
        for s in streams:
            if s.flow is not None and s.flow[0] not in groups:
                groups.append(s.flow[0])
        out["flow"] = {
            "group": groups.index(stream.flow[0]),
            "weight": stream.flow[1],
            "sleep_us": round(stream.flow_sleep_s * 1e6),
        }
    if stream.on_end_stop:
        out["on_end"] = {
            "stop": [j for j in stop_indices(streams, index) if j != index],
            "started_only": stream.on_end_only_started,
        }
        if not out["on_end"]["stop"]:
            del out["on_end"]
    return out


def check_batch_gap(stream: Any) -> None:
    """A batch's IOs spread apart (`batch_gap`) leave room between batches at the stream's
    rate (the engine's rule, plan.rs), said before anything runs. `stream` is a
    plan.StreamSpec."""
    gap = stream.batch_gap_s
    if gap == 0:
        return
    label = stream.label("batch_gap")
    if gap < 0 or stream.batch <= 1:
        raise UsageError(
            f"{label} spreads a batch's IOs apart: it needs {stream.key('batch')} above 1 "
            f"(it is {stream.batch:g}) and a duration of 0 or more."
        )
    rate = stream.rate_iops
    if rate is None and stream.rate_bytes is not None:
        mean_size = sum(size * share for size, share in stream.sizes) / sum(
            share for _, share in stream.sizes
        )
        rate = stream.rate_bytes / mean_size
    if rate is None:
        return  # closed loop: batch says so already
    most = stream.batch / (stream.batch - 1) / rate
    if gap >= most:
        raise UsageError(
            f"{label} {gap * 1e3:.4g} ms leaves no time between batches at {rate:g} IOPS in "
            f"batches of {stream.batch:g}; it must be below {most * 1e3:.4g} ms (batch / "
            "(batch - 1) times the mean gap)."
        )
