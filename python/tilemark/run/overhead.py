"""What tilemark's own machinery cost a run (issue 25, "overhead a user can see").

A latency figure mixes the storage's time with the tool's: the IO waits to be issued, to reach
the device, and after the device completes it, to be reaped. A user who wants to know which
share is whose needs the tool's side measured beside the device's, so every run's summary
carries `overhead`:

- **CPU per IO**: the process's CPU time over the measurement (engine threads, the front end
  and the rest of the process, from the telemetry sampler's /proc/self/task readings) divided
  by the data IOs completed; the front end's share of one CPU besides. fio reports CPU as
  usr/sys percentages; per IO is what compares across rates and tools (bench/vs_fio.py).
- **Issue lateness**: how long after its intended time each open-loop IO was submitted (the
  engine's own clock, all streams merged: summary.issue_lateness).
- **Service time above the device**: per direction, the mean service time by tilemark's clock
  (submission to reaping) against the mean time the block layer of the device serving the
  target counted for the same IOs (diskstats' read/write ticks per IO, iostat's r_await and
  w_await). The difference is the time spent above the device: in the submission system call,
  in any layer between tilemark and that device (a file system, a loop device's own queue is
  *below*), and between the device's completion and tilemark reaping it. It is shown only
  where the comparison holds: one device directly under the run's targets (depth 0), which saw
  the IOs tilemark sent (its IOPS within `SAME_IOS` of tilemark's in that direction: not a
  page cache absorbing them, not another tenant adding its own).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec

from tilemark.store.results import HostCpu, Overhead, PollerModes

# The device's IO count in a direction must be within this fraction of tilemark's for its
# mean service time to describe the same IOs.
SAME_IOS = 0.05
# Direction, the device's IO count and its mean time per IO in summary.telemetry.devices.
DIRECTIONS = (("read", "reads", "r_await_ms"), ("write", "writes", "w_await_ms"))


def tool_overhead(
    summary: dict[str, Any],
    host: dict[str, Any] | None,
    devices: list[dict[str, Any]] | None,
    poller: list[PollerModes] | None = None,
) -> dict[str, Any] | None:
    """run.json `summary.overhead` from a run's summary (streams, total, issue_lateness),
    the telemetry's host means and device totals, and the engine result's `poller` (how long
    the IO threads ran with spinning allowed and batched submissions); None when nothing was
    measured."""
    total = summary.get("total") or {}
    duration = float(summary.get("duration_s") or total.get("duration_s") or 0.0)
    streams = summary.get("streams") or []
    ios = sum(int(_op(s, op).get("ops") or 0) for s in streams for op in ("read", "write"))
    if not ios or duration <= 0:
        return None
    out: dict[str, Any] = {"ios": ios}
    cpu = HostCpu.of(host)
    process, engine = cpu.process_cpu_pct, cpu.engine_cpu_pct
    aggregate = cpu.aggregate_cpu_pct or 0.0
    if process is not None:
        out["cpu_per_io_us"] = process / 100 * duration / ios * 1e6
        if engine is not None:
            engine = min(engine, process)  # both read in clock ticks (10 ms): a tick apart
            aggregate = min(aggregate, process - engine)
            out["engine_cpu_per_io_us"] = engine / 100 * duration / ios * 1e6
            # The engine's aggregation thread (interval frames, the run's totals) apart from
            # the IO threads and from the front end (Python and the rest of the process).
            out["aggregate_cpu_pct"] = aggregate
            out["front_end_cpu_pct"] = max(0.0, process - engine - aggregate)
    late = summary.get("issue_lateness") or {}
    if late.get("ios"):
        out["issue_lateness_p50_us"] = late.get("p50_us")
        out["issue_lateness_p99_us"] = late.get("p99_us")
    out["service"] = _service(streams, devices or [])
    seconds = sum(p.seconds or 0.0 for p in poller or [])
    if seconds > 0:
        # Weighted by each thread's judged time: the share of the IO threads' time.
        def share(pct: Callable[[PollerModes], float | None]) -> float:
            mean = sum((pct(p) or 0.0) * (p.seconds or 0.0) for p in poller or []) / seconds
            return min(100.0, max(0.0, mean))  # a share: not 100.00000000000001

        out["spin_allowed_pct"] = share(lambda p: p.spin_allowed_pct)
        out["batched_pct"] = share(lambda p: p.batched_pct)
    return out


def _op(stream: dict[str, Any], op: str) -> dict[str, Any]:
    return stream.get(op) or {}


def _service(streams: list[dict[str, Any]], devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per direction: tilemark's mean service time and the serving device's, where the
    device saw the same IOs."""
    top = [d for d in devices if d.get("depth") == 0]
    rows = []
    if len(top) != 1:
        return rows
    dev = top[0]
    for op, count_key, await_key in DIRECTIONS:
        ops = sum(int(_op(s, op).get("ops") or 0) for s in streams)
        timed = [
            (int(_op(s, op)["ops"]), mean)
            for s in streams
            if _op(s, op).get("ops")
            and (mean := (_op(s, op).get("service") or {}).get("mean_ms")) is not None
        ]
        device_ios, device_ms = dev.get(count_key), dev.get(await_key)
        if not ops or not timed or device_ms is None or not device_ios:
            continue
        if abs(device_ios - ops) > SAME_IOS * ops:
            continue
        mean_us = sum(n * ms for n, ms in timed) / sum(n for n, _ in timed) * 1e3
        device_us = device_ms * 1e3
        rows.append(
            {
                "op": op,
                "device": dev.get("device"),
                "ios": ops,
                "device_ios": int(device_ios),
                "mean_us": mean_us,
                "device_mean_us": device_us,
                "above_device_us": mean_us - device_us,
            }
        )
    return rows


def overhead_line(overhead: dict[str, Any] | None) -> str | None:
    """One line for the run's summary: CPU per IO, issue lateness, time above the device."""
    if not overhead:
        return None
    o = msgspec.convert(overhead, Overhead)
    parts = []
    if o.cpu_per_io_us is not None:
        text = f"{_us(o.cpu_per_io_us)} of CPU per IO"
        if o.engine_cpu_per_io_us is not None and o.front_end_cpu_pct is not None:
            text += f" (engine IO threads {_us(o.engine_cpu_per_io_us)}; "
            if o.aggregate_cpu_pct is not None:
                text += f"its aggregation {o.aggregate_cpu_pct:.1f}% of a CPU; "
            text += f"front end {o.front_end_cpu_pct:.1f}% of a CPU)"
        parts.append(text)
    if o.issue_lateness_p50_us is not None and o.issue_lateness_p99_us is not None:
        parts.append(
            f"open-loop IOs issued {_us(o.issue_lateness_p50_us)} (p50) / "
            f"{_us(o.issue_lateness_p99_us)} (p99) after their time"
        )
    if o.spin_allowed_pct is not None and o.batched_pct is not None:
        # What the CPU per IO bought (crates/engine/src/backend/judge.rs decides it).
        parts.append(
            f"IO threads spinning allowed {o.spin_allowed_pct:.0f}% of the time, "
            f"submitting in batches {o.batched_pct:.0f}%"
        )
    for s in o.service or []:
        parts.append(
            f"{s.op}s served in {_us(s.mean_us)} on average, {s.device} itself "
            f"{_us(s.device_mean_us)}: {_us(s.above_device_us)} above the device"
        )
    return "tool overhead: " + "; ".join(parts) if parts else None


def _us(v: float | None) -> str:
    if v is None:
        return "-"
    if abs(v) >= 1000:
        return f"{v / 1000:,.2f} ms"
    return f"{v:,.1f} us" if abs(v) < 100 else f"{v:,.0f} us"
