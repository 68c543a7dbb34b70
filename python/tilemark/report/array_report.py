"""The report section on counters attached from the storage side (`tilemark attach`).

Seed 001 read an array's front-end director IOPS and its disk IOPS beside what the hosts
asked for. Here the array's counters are drawn on the run's clock under tilemark's own reads
and writes per second, and tabled two ways: each counter over the measurement phase beside
tilemark's IOPS and MB/s (with their ratio), and sample by sample beside what tilemark did
over the same span.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

import altair as alt

from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Section, Table
from tilemark.report.data import RunData
from tilemark.report.format import num
from tilemark.report.telemetry import front_back_series, front_end_rows
from tilemark.store.array import ArrayUnreadable, read_array

MAX_TABLE_ROWS = 120  # samples listed one by one; more are merged into consecutive groups
MAX_TABLE_COUNTERS = 12  # counters in the per-sample table; all of them are in the CSV
MAX_POINTS = 600  # points per counter line


def _label(row: dict[str, Any], sources: int) -> str:
    return row["counter"] if sources == 1 else f"{row['source']}: {row['counter']}"


def counter_order(sources: list[dict[str, Any]]) -> list[str]:
    """Counter labels in the order of the files' columns, source by source."""
    many = len(sources)
    return [
        _label({"source": s["name"], "counter": c}, many) for s in sources for c in s["counters"]
    ]


def counter_series(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chart rows (t_s, group, value), at most MAX_POINTS per counter (consecutive samples
    averaged beyond that)."""
    sources = len({r["source"] for r in rows})
    by_group: dict[str, list[tuple[float, float]]] = {}
    for r in rows:
        if r["value"] is not None:
            by_group.setdefault(_label(r, sources), []).append((r["t_ns"] / 1e9, r["value"]))
    out = []
    for group, points in by_group.items():
        k = max(1, math.ceil(len(points) / MAX_POINTS))
        for i in range(0, len(points), k):
            chunk = points[i : i + k]
            out.append(
                {
                    "t_s": sum(t for t, _ in chunk) / len(chunk),
                    "group": group,
                    "value": sum(v for _, v in chunk) / len(chunk),
                }
            )
    return out


# What a counter counts, from its name: a share in % must not share an axis with IOPS (a cache
# hit ratio of 95 drawn at the foot of an IOPS axis in thousands says nothing).
COUNTER_KINDS = (
    ("%", re.compile(r"%|pct|percent|ratio|util|hit|busy", re.I), "share (%)"),
    ("ms", re.compile(r"latency|\blat\b|_ms\b|\bms\b|\bus\b|usec|msec|resp", re.I), "time"),
    ("bytes", re.compile(r"mb|gb|kb|bytes|bandwidth|throughput|\bbw\b", re.I), "bytes or MB/s"),
)


def counter_kind(name: str) -> tuple[str, str]:
    """(kind, axis title) of a counter by its name; IOs or operations by default."""
    for kind, pattern, title in COUNTER_KINDS:
        if pattern.search(name):
            return kind, title
    return "count", "IOs or operations (the storage's unit)"


def counters_chart(
    rows: list[dict[str, Any]], warmup_s: float, order: list[str]
) -> alt.TopLevelMixin:
    """Every attached counter over the run's time, in the files' column order: one panel per
    kind of counter (shares in %, times, bytes, counts), each on its own axis, and a drop-down
    in a panel with many counters."""
    present = {r["group"] for r in rows}
    groups = [g for g in order if g in present] + sorted(present - set(order))
    kinds: dict[str, tuple[str, list[str]]] = {}
    for g in groups:
        kind, title = counter_kind(g)
        kinds.setdefault(kind, (title, []))[1].append(g)
    panels = [
        _counter_panel([r for r in rows if r["group"] in mine], mine, warmup_s, title, kind)
        for kind, (title, mine) in kinds.items()
    ]
    chart = (
        panels[0]
        if len(panels) == 1
        # One time axis for every panel (and the front end's chart above them): the warm-up
        # band and every sample stand at the same place in each.
        else alt.vconcat(*panels).resolve_scale(x="shared", y="independent", color="independent")
    )
    return chart.properties(title="Counters attached from the storage side")


def _counter_panel(
    rows: list[dict[str, Any]], groups: list[str], warmup_s: float, y_title: str, kind: str
) -> alt.TopLevelMixin:
    data = charts.dataset(charts.compact(rows, ("t_s", "group", "value")))
    x = alt.X("t_s:Q", title=charts.TIME_TITLE, scale=alt.Scale(nice=False))
    y = alt.Y("value:Q", title=y_title)
    tooltip = [
        alt.Tooltip("group:N", title="counter"),
        alt.Tooltip("t_s:Q", title="t (s)"),
        alt.Tooltip("value:Q", title="value", format=",.4~g"),
    ]
    line = alt.Chart(data).mark_line(strokeWidth=1.5, point=len(rows) <= 200)
    if len(groups) > charts.MAX_LINES:
        picker = alt.param(
            name=f"pick_counter_{kind}" if kind != "count" else "pick_counter",
            value=groups[0],
            bind=alt.binding_select(options=groups, name="counter: "),
        )
        chart = (
            line.encode(x=x, y=y, tooltip=tooltip)
            .add_params(picker)
            .transform_filter(alt.datum.group == picker)
        )
    else:
        chart = line.encode(
            x=x, y=y, color=alt.Color("group:N", title="counter", sort=groups), tooltip=tooltip
        )
    warm = charts._warmup_layer(warmup_s)
    layered = (warm + chart) if warm is not None else chart
    return layered.properties(width=charts.WIDTH, height=charts.SMALL_HEIGHT)


def _front_over(front: list[dict[str, Any]], lo: float, hi: float) -> tuple[float, float, float]:
    """tilemark's reads/s, writes/s and MB/s over run time [lo, hi] (s), from the intervals
    that overlap it, each weighted by its overlap."""
    reads = writes = nbytes = 0.0
    covered = 0.0
    for f in front:
        start, end = f["start_ns"] / 1e9, f["end_ns"] / 1e9
        overlap = min(end, hi) - max(start, lo)
        if overlap <= 0 or end <= start:
            continue
        share = overlap / (end - start)
        reads += f["reads"] * share
        writes += f["writes"] * share
        nbytes += f["bytes"] * share
        covered += overlap
    if covered <= 0:
        return math.nan, math.nan, math.nan
    return reads / covered, writes / covered, nbytes / 1e6 / covered


def totals_table(
    rows: list[dict[str, Any]], front: list[dict[str, Any]], order: list[str]
) -> Table | None:
    """Each counter over the measurement phase beside tilemark's IOPS and MB/s (seed 001)."""
    measure = [f for f in front if f["phase"] == "measure"]
    if not measure:
        return None
    lo, hi = measure[0]["start_ns"] / 1e9, measure[-1]["end_ns"] / 1e9
    fr, fw, fmb = _front_over(measure, lo, hi)
    iops = fr + fw
    sources = len({r["source"] for r in rows})
    by_counter: dict[str, list[float]] = {}
    for r in rows:
        if r["phase"] == "measure" and r["value"] is not None:
            by_counter.setdefault(_label(r, sources), []).append(r["value"])
    cells = [
        [Cell("front end"), Cell("tilemark IOPS"), Cell("", "num"), Cell(num(iops), "num"),
         Cell("", "num"), Cell("", "num"), Cell("1.00", "num"), Cell("", "num")],
        [Cell("front end"), Cell("tilemark MB/s"), Cell("", "num"), Cell(num(fmb), "num"),
         Cell("", "num"), Cell("", "num"), Cell("", "num"), Cell("1.00", "num")],
    ]  # fmt: skip
    for name in sorted(by_counter, key=lambda n: order.index(n) if n in order else len(order)):
        values = by_counter[name]
        mean = statistics.fmean(values)
        cells.append(
            [
                Cell("storage"),
                Cell(name),
                Cell(str(len(values)), "num"),
                Cell(num(mean), "num"),
                Cell(num(min(values)), "num"),
                Cell(num(max(values)), "num"),
                Cell(f"{mean / iops:.3g}" if iops else "-", "num"),
                Cell(f"{mean / fmb:.3g}" if fmb else "-", "num"),
            ]
        )
    return Table(
        "array-vs-front",
        "Front end (tilemark) vs the storage's counters, measurement phase",
        ["side", "counter", "samples", "mean", "min", "max", "mean / IOPS", "mean / MB/s"],
        cells,
        caption=(
            "Counters keep the storage's own units. For an IO-rate counter, mean / IOPS is the "
            "storage's IOs per tilemark IO (seed 001: disk IOPS matching front-end IOPS; below "
            "1 a cache absorbed IOs, above 1 a RAID penalty or prefetch added some); for a "
            "byte-rate counter in MB/s, mean / MB/s is the same for bytes."
        ),
    )


def samples_table(
    rows: list[dict[str, Any]], front: list[dict[str, Any]], order: list[str]
) -> Table:
    """Sample by sample: tilemark's rates over the span each sample covers, beside the
    counters (consecutive samples merged beyond MAX_TABLE_ROWS)."""
    sources = len({r["source"] for r in rows})
    present = {_label(r, sources) for r in rows}
    names = [n for n in order if n in present][:MAX_TABLE_COUNTERS]
    samples: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        s = samples.setdefault((r["source"], r["t_ns"]), {"t_ns": r["t_ns"], "phase": r["phase"]})
        s[_label(r, sources)] = r["value"]
    ordered = sorted(samples.values(), key=lambda s: s["t_ns"])
    times = [s["t_ns"] / 1e9 for s in ordered]
    gaps = [b - a for a, b in zip(times, times[1:], strict=False) if b > a]
    first_span = statistics.median(gaps) if gaps else 1.0
    k = max(1, math.ceil(len(ordered) / MAX_TABLE_ROWS))
    cells = []
    for i in range(0, len(ordered), k):
        group = ordered[i : i + k]
        hi = group[-1]["t_ns"] / 1e9
        lo = ordered[i - 1]["t_ns"] / 1e9 if i > 0 else max(0.0, times[0] - first_span)
        fr, fw, fmb = _front_over(front, lo, hi)
        row = [
            Cell(num(hi), "num"),
            Cell(group[-1]["phase"]),
            Cell(num(fr), "num"),
            Cell(num(fw), "num"),
            Cell(num(fmb), "num"),
        ]
        for name in names:
            values = [s[name] for s in group if s.get(name) is not None]
            row.append(Cell(num(statistics.fmean(values)) if values else "-", "num"))
        cells.append(row)
    more = len(present) - len(names)
    return Table(
        "array-samples",
        "Front end vs the storage's counters, sample by sample",
        ["t (s)", "phase", "tilemark r/s", "tilemark w/s", "tilemark MB/s", *names],
        cells,
        caption=(
            "t: the sample's time on the run's clock; tilemark's rates are over the span since "
            "the previous sample (the storage reports each sample for the period it closes)."
            + (f" Every {k} consecutive samples are merged." if k > 1 else "")
            + (f" {more} more counters are in `tilemark export --csv` (array.csv)." if more else "")
        ),
    )


def array_section(run: RunData, prefix: str = "") -> Section | None:
    """The attached counters of a run, or None when nothing is attached."""
    try:
        rows, sources = read_array(run.run_dir)
    except ArrayUnreadable as e:
        return Section(f"{prefix}array", "Storage counters (attached)", [], f"{e}.")
    if not rows:
        return None
    order = counter_order(sources)
    by_interval = front_end_rows(run)
    front = sorted(by_interval.values(), key=lambda f: f["start_ns"])
    warm = run.warmup_s()
    tilemark = front_back_series(by_interval, [])
    iops = charts.throughput_over_time(
        tilemark,
        field="iops",
        title="Front end (tilemark): IOs per second",
        warmup_s=warm,
        group_title="side",
    )
    items: list[Figure | Table] = [
        Figure(
            f"{prefix}array-counters",
            "Front end vs the storage's counters",
            alt.vconcat(iops, counters_chart(counter_series(rows), warm, order)).resolve_scale(
                color="independent", x="shared"
            ),
            caption="tilemark's reads and writes per second above, the counters attached from "
            "the storage below, on the same clock (time since the run started).",
        )
    ]
    totals = totals_table(rows, front, order)
    if totals is not None:
        items.append(totals)
    items.append(samples_table(rows, front, order))
    intro = " ".join(
        f"{s['name']}: {s['rows_kept']} samples of {len(s['counters'])} counters from "
        f"{s['file']} (timestamps in {s['time_column']!r}, offset {s['offset_s']:+g} s"
        + (
            f"; {s['dropped_before'] + s['dropped_after']} rows outside the run dropped"
            if s["dropped_before"] + s["dropped_after"]
            else ""
        )
        + ")."
        for s in sources
    )
    return Section(f"{prefix}array", "Storage counters (attached)", items, intro)
