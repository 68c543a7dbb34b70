"""The report section on the devices underneath and the host (telemetry.py's rows).

Front end (what tilemark issued, from the intervals) beside back end (what each device
underneath completed, from devices.parquet), per interval and in total, and the host's CPU
and pressure stall information over time (host.parquet).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt
import pyarrow as pa

from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Section, Table
from tilemark.report.data import RunData
from tilemark.report.format import num
from tilemark.store import results
from tilemark.store.intervals import IntervalsUnreadable, log_batches, read_parquet
from tilemark.telemetry import sampler as tm

# Intervals listed one by one in the per-interval table; a longer run shows its charts only.
MAX_TABLE_INTERVALS = 120
# Points per chart line; a longer run's intervals are merged for display (the files keep all).
MAX_POINTS = 600
HOST_SERIES = {
    "cpu_busy_pct": "host CPU busy %",
    "cpu_iowait_pct": "host CPU iowait %",
    "cpu_steal_pct": "host CPU steal %",
    "engine_cpu_pct": "engine IO threads CPU % (of one CPU)",
    "aggregate_cpu_pct": "engine aggregation thread CPU % (of one CPU)",
    "io_some_pct": "io pressure (some) %",
    "io_full_pct": "io pressure (full) %",
    "cpu_some_pct": "cpu pressure (some) %",
    "memory_some_pct": "memory pressure (some) %",
}


def read_rows(run_dir: Path, final: str, log: str) -> list[dict[str, Any]]:
    """A telemetry file's rows: the sealed Parquet file, else the log of a run that did not
    finish; [] when neither can be read."""
    try:
        if (run_dir / final).is_file():
            return read_parquet(run_dir / final).to_pylist()
        if (run_dir / log).is_file():
            batches = list(log_batches(run_dir / log))
            return pa.Table.from_batches(batches).to_pylist() if batches else []
    except (OSError, pa.ArrowException, IntervalsUnreadable):
        return []
    return []


def front_end_rows(run: RunData) -> dict[int, dict[str, Any]]:
    """Per interval: tilemark's read and write IOs, their bytes, and the interval's span."""
    table = run.read_intervals(["interval", "phase", "start_ns", "end_ns", "op", "ops", "bytes"])
    out: dict[int, dict[str, Any]] = {}
    for r in table.to_pylist():
        row = out.setdefault(
            r["interval"],
            {
                "interval": r["interval"],
                "phase": r["phase"],
                "start_ns": r["start_ns"],
                "end_ns": r["end_ns"],
                "reads": 0,
                "writes": 0,
                "bytes": 0,
            },
        )
        if r["op"] == "read":
            row["reads"] += r["ops"] or 0
        elif r["op"] == "write":
            row["writes"] += r["ops"] or 0
        if r["op"] in ("read", "write"):
            row["bytes"] += r["bytes"] or 0
    return out


def _per_bucket(count: int) -> int:
    """Intervals merged into one chart point so a long run draws at most MAX_POINTS."""
    return max(1, -(-count // MAX_POINTS))


def front_back_series(
    front: dict[int, dict[str, Any]], devices: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Chart rows (t_s, group, iops): tilemark's and each device's reads and writes/s, with
    consecutive intervals merged (counts and time summed) beyond MAX_POINTS."""
    k = _per_bucket(len(front))
    sums: dict[tuple[str, int], list[float]] = {}  # (group, bucket) -> [t_sum, n, ios, seconds]

    def add(group: str, interval: int, t: float, ios: float, seconds: float) -> None:
        acc = sums.setdefault((group, interval // k), [0.0, 0, 0.0, 0.0])
        acc[0] += t
        acc[1] += 1
        acc[2] += ios
        acc[3] += seconds

    for f in front.values():
        seconds = (f["end_ns"] - f["start_ns"]) / 1e9
        t = (f["start_ns"] + f["end_ns"]) / 2e9
        add("tilemark reads", f["interval"], t, f["reads"], seconds)
        add("tilemark writes", f["interval"], t, f["writes"], seconds)
    for d in devices:
        t = (d["start_ns"] + d["end_ns"]) / 2e9
        seconds = d["sample_ns"] / 1e9
        add(f"{d['device']} reads", d["interval"], t, d["reads"], seconds)
        add(f"{d['device']} writes", d["interval"], t, d["writes"], seconds)
    return [
        {"t_s": t_sum / n, "group": group, "iops": ios / seconds}
        for (group, _), (t_sum, n, ios, seconds) in sorted(sums.items(), key=lambda kv: kv[0][1])
        if seconds > 0
    ]


def host_series(host: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chart rows (t_s, series, pct) of the host's CPU shares and pressure, with consecutive
    intervals merged (weighted by their length) beyond MAX_POINTS."""
    k = _per_bucket(len(host))
    sums: dict[tuple[str, int], list[float]] = {}  # -> [t_sum, n, pct * s, s]
    for h in host:
        t = (h["start_ns"] + h["end_ns"]) / 2e9
        seconds = h["sample_ns"] / 1e9
        for key, label in HOST_SERIES.items():
            if h.get(key) is not None:
                acc = sums.setdefault((label, h["interval"] // k), [0.0, 0, 0.0, 0.0])
                acc[0] += t
                acc[1] += 1
                acc[2] += h[key] * seconds
                acc[3] += seconds
    return [
        {"t_s": t_sum / n, "series": label, "pct": weighted / seconds}
        for (label, _), (t_sum, n, weighted, seconds) in sorted(
            sums.items(), key=lambda kv: kv[0][1]
        )
        if seconds > 0
    ]


def host_chart(rows: list[dict[str, Any]], warmup_s: float) -> alt.TopLevelMixin:
    data = charts.dataset(charts.compact(rows, ("t_s", "series", "pct")))
    order = [label for label in HOST_SERIES.values() if any(r["series"] == label for r in rows)]
    line = (
        alt.Chart(data)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("t_s:Q", title=charts.TIME_TITLE, scale=alt.Scale(nice=False)),
            y=alt.Y("pct:Q", title="% (engine: of one CPU)"),
            color=alt.Color("series:N", title="series", sort=order),
            tooltip=[
                alt.Tooltip("series:N"),
                alt.Tooltip("t_s:Q", title="t (s)"),
                alt.Tooltip("pct:Q", title="%", format=",.4~g"),
            ],
        )
    )
    warm = charts._warmup_layer(warmup_s)
    layered = (warm + line) if warm is not None else line
    return layered.properties(
        title="Host CPU and pressure stall information", width=charts.WIDTH, height=charts.HEIGHT
    )


def _ratio(back: float | None, front: float | None) -> str:
    return f"{back / front:.2f}" if back is not None and front else "-"


def overhead_table(summary: results.Summary) -> Table | None:
    """What tilemark's own machinery cost over the measurement (summary.overhead,
    run/overhead.py): CPU per IO, issue lateness, service time above the device."""
    o = summary.overhead
    if o is None:
        return None
    rows: list[tuple[str, str, str]] = []
    if o.cpu_per_io_us is not None:
        rows.append(("CPU per IO", f"{num(o.cpu_per_io_us)} us", "the whole process"))
    if o.engine_cpu_per_io_us is not None:
        rows.append(("engine CPU per IO", f"{num(o.engine_cpu_per_io_us)} us", "IO threads"))
    if o.aggregate_cpu_pct is not None:
        rows.append(
            (
                "engine aggregation",
                f"{num(o.aggregate_cpu_pct)}% of a CPU",
                "interval frames and totals, off the IO threads",
            )
        )
    if o.front_end_cpu_pct is not None:
        rows.append(("front end", f"{num(o.front_end_cpu_pct)}% of a CPU", "the rest of it"))
    if o.issue_lateness_p99_us is not None:
        rows.append(
            (
                "issue lateness p50 / p99",
                f"{num(o.issue_lateness_p50_us)} / {num(o.issue_lateness_p99_us)} us",
                "open-loop IOs, submission minus intended time",
            )
        )
    if o.spin_allowed_pct is not None and o.batched_pct is not None:
        rows.append(
            (
                "IO threads' poller",
                f"spinning allowed {num(o.spin_allowed_pct)}%, batched {num(o.batched_pct)}%",
                "of their time: what the CPU per IO bought (the judge, docs/engine-boundary.md)",
            )
        )
    for d in o.service or []:
        rows.append(
            (
                f"{d.op} service, mean",
                f"{num(d.mean_us)} us",
                f"{d.device} itself {num(d.device_mean_us)} us: "
                f"{num(d.above_device_us)} us above the device",
            )
        )
    if not rows:
        return None
    return Table(
        "overhead",
        "What tilemark itself added",
        ["measure", "value", "of what"],
        [[Cell(a), Cell(b, "num"), Cell(c)] for a, b, c in rows],
        caption=(
            "CPU from the process's threads (clock ticks) over the IOs completed; service time "
            "above the device = tilemark's mean (submission to reaping) minus the block "
            "layer's own time per IO of the device serving the target (iostat's r_await, "
            "w_await), shown where that device saw the same IOs: the submission call, any "
            "layer between (a file system) and the wait until tilemark reaped the completion."
        ),
    )


def totals_table(summary: results.Summary) -> Table | None:
    """Front end vs back end over the measurement (summary.telemetry.front_vs_back)."""
    rows = (summary.telemetry.front_vs_back if summary.telemetry else None) or []
    if len(rows) < 2:
        return None
    cells = []
    for r in rows:
        back = r.side == "back end"
        cells.append(
            [
                Cell(r.side),  # type: ignore[arg-type]
                Cell(r.name),  # type: ignore[arg-type]
                Cell("" if r.depth is None else str(r.depth), "num"),
                Cell(num(r.read_iops), "num"),
                Cell(num(r.read_iops_ratio) if back else "", "num"),
                Cell(num(r.write_iops), "num"),
                Cell(num(r.write_iops_ratio) if back else "", "num"),
                Cell(num(r.read_mbps), "num"),
                Cell(num(r.write_mbps), "num"),
                Cell(num(r.util_pct) if back else "", "num"),
            ]
        )
    return Table(
        "front-vs-back",
        "Front end (tilemark) vs back end (devices), measurement phase",
        [
            "side",
            "name",
            "depth",
            "read IOPS",
            "read ratio",
            "write IOPS",
            "write ratio",
            "read MB/s",
            "write MB/s",
            "util %",
        ],
        cells,
        caption=(
            "ratio = device / tilemark. Below 1 a cache (the page cache, a controller) absorbed "
            "IOs; above 1 the device did more than tilemark asked (a RAID write penalty, "
            "read-ahead, other processes). Depth 0 serves the target directly; deeper devices "
            "are under it (a loop device's backing filesystem, a dm device's slaves)."
        ),
    )


def kernel_table(summary: results.Summary) -> Table | None:
    """What the kernel logged about the run's devices and files while it ran."""
    kernel = summary.telemetry.kernel if summary.telemetry else None
    if kernel is None or not kernel.messages:
        return None
    levels = ("emerg", "alert", "crit", "err", "warning", "notice", "info", "debug")
    cells = [
        [Cell(f"{m.t_s:.6f}", "num"), Cell(levels[m.level & 7]), Cell(m.message)]
        for m in kernel.messages
    ]
    more = kernel.count - len(kernel.messages)
    return Table(
        "kernel",
        f"The kernel's messages about the run's devices ({kernel.count:,})",
        ["seconds since boot", "level", "message"],
        cells,
        caption="From /dev/kmsg, logged while the run ran and naming one of its devices or "
        "target files (docs/reliability.md)" + (f"; {more:,} more not kept" if more else "") + ".",
    )


def device_table(summary: results.Summary) -> Table | None:
    """The devices underneath, iostat -x figures over the measurement."""
    devices = (summary.telemetry.devices if summary.telemetry else None) or []
    if not devices:
        return None
    cells = [
        [
            Cell(d.device),  # type: ignore[arg-type]
            Cell(d.kind),  # type: ignore[arg-type]
            Cell(str(d.depth), "num"),
            *[
                Cell(num(v), "num")
                for v in (
                    d.read_iops,
                    d.write_iops,
                    d.read_mbps,
                    d.write_mbps,
                    d.read_merges_s,
                    d.write_merges_s,
                    d.r_await_ms,
                    d.w_await_ms,
                    d.aqu_sz,
                    d.util_pct,
                )
            ],
        ]
        for d in devices
    ]
    return Table(
        "devices",
        "Devices underneath (iostat -x figures, measurement phase)",
        [
            "device",
            "kind",
            "depth",
            "r/s",
            "w/s",
            "read MB/s",
            "write MB/s",
            "rrqm/s",
            "wrqm/s",
            "r_await ms",
            "w_await ms",
            "aqu-sz",
            "util %",
        ],
        cells,
        caption="From /proc/diskstats sampled at every interval boundary, with iostat -x's "
        "formulas (docs/results-schema.md, telemetry).",
    )


def interval_table(front: dict[int, dict[str, Any]], devices: list[dict[str, Any]]) -> Table | None:
    """Per interval: tilemark's and the depth-0 devices' read and write IOPS and ratios."""
    if not devices or len(front) > MAX_TABLE_INTERVALS:
        return None
    back: dict[int, list[float]] = {}
    for d in devices:
        if d["depth"] == 0:
            acc = back.setdefault(d["interval"], [0.0, 0.0])
            acc[0] += d["read_iops"] or 0.0
            acc[1] += d["write_iops"] or 0.0
    cells = []
    for i in sorted(front):
        f = front[i]
        seconds = (f["end_ns"] - f["start_ns"]) / 1e9
        if seconds <= 0:
            continue
        fr, fw = f["reads"] / seconds, f["writes"] / seconds
        br, bw = back.get(i, (None, None))
        cells.append(
            [
                Cell(str(i), "num"),
                Cell(f["phase"] or ""),
                Cell(num(f["end_ns"] / 1e9), "num"),
                Cell(num(fr), "num"),
                Cell(num(br), "num"),
                Cell(_ratio(br, fr), "num"),
                Cell(num(fw), "num"),
                Cell(num(bw), "num"),
                Cell(_ratio(bw, fw), "num"),
            ]
        )
    return Table(
        "front-vs-back-intervals",
        "Front end vs back end per interval (devices at depth 0)",
        [
            "interval",
            "phase",
            "end s",
            "tilemark r/s",
            "device r/s",
            "read ratio",
            "tilemark w/s",
            "device w/s",
            "write ratio",
        ],
        cells,
    )


def telemetry_section(run: RunData, prefix: str = "") -> Section | None:
    """The devices-and-host section of a run report; None for a run without telemetry."""
    record = run.doc.get("telemetry")
    if not record:
        return None
    devices = read_rows(run.run_dir, tm.DEVICES_FILE, tm.DEVICES_LOG)
    host = read_rows(run.run_dir, tm.HOST_FILE, tm.HOST_LOG)
    front = front_end_rows(run)
    warm = run.warmup_s()
    items: list[Figure | Table] = []
    if devices:
        items.append(
            Figure(
                f"{prefix}front-vs-back",
                "Front end vs back end",
                charts.throughput_over_time(
                    front_back_series(front, devices),
                    field="iops",
                    title="Front end (tilemark) vs back end (devices): IOs per second",
                    warmup_s=warm,
                    group_title="side",
                ),
                caption="tilemark's reads and writes per second beside what each device "
                "underneath completed in the same interval.",
            )
        )
    if host:
        items.append(
            Figure(
                f"{prefix}host",
                "Host CPU and pressure",
                host_chart(host_series(host), warm),
                caption="busy = 100 - idle - iowait (user, system, irq, steal); pressure = "
                "share of the interval some tasks stalled on the resource (/proc/pressure).",
            )
        )
    typed = run.typed.summary or results.Summary()
    tables = (
        totals_table(typed),
        overhead_table(typed),
        device_table(typed),
        kernel_table(typed),
        interval_table(front, devices),
    )
    for table in tables:
        if table is not None:
            items.append(table)
    notes = list(record.get("notes") or [])
    intro = " ".join(notes) if notes else ""
    if not items and not intro:
        return None
    return Section(f"{prefix}telemetry", "Devices underneath and the host", items, intro)


def tool_bound_notes(summary: dict[str, Any] | None) -> list[str]:
    """The verdict's tool-bound sentence (one, however many streams fell behind)."""
    line = tm.tool_bound_line((summary or {}).get("tool_bound"))
    return [] if line is None else [line]
