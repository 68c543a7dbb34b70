"""The report of a sweep, an Orion matrix or a load/latency curve (study/points.py, curve.py).

The points table is the study; charts draw it: a sweep's IOPS and MB/s against IO size (two
panels) and latency against queue depth; a matrix's three matrices as heatmaps; a curve's
response-time percentiles against achieved IOPS, with the knee and the objective marked.
"""

from __future__ import annotations

from typing import Any

import altair as alt

from tilemark.report import charts
from tilemark.report.base import Caution, Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.charts import SMALL_HEIGHT, SMALL_WIDTH, compact, dataset
from tilemark.report.data import StudyData
from tilemark.report.format import generated_by, num, tested_on
from tilemark.report.study_report import study_details, study_links
from tilemark.store import results
from tilemark.units import format_size
from tilemark.wording import counted

POINT_KINDS = ("sweep", "matrix", "curve")


def points_report(study: StudyData) -> Report:
    kind = study.typed.kind
    build = {"sweep": _sweep, "matrix": _matrix, "curve": _curve}[kind]  # type: ignore[index]
    verdict, sections = build(study)
    verdict.tested = _tested(study) + verdict.tested
    bound = [i for i, p in enumerate(study.typed.points or [], 1) if p.get("tool_bound")]
    if bound:
        verdict.notes.append(
            Caution(
                f"{'point' if len(bound) == 1 else 'points'} {', '.join(map(str, bound))} "
                f"{'was' if len(bound) == 1 else 'were'} tool-bound (host CPU above 85% or the "
                "engine behind its schedule): their numbers describe the host, not the storage"
            )
        )
        verdict.status = "warn"
    if study.typed.complete is False:
        verdict.notes.append(Caution("the study was interrupted: the points so far are shown"))
        verdict.status = "warn"
    return Report(
        kind="study",
        title=f"tilemark report: {kind} {study.study_id}"
        + (f" ({study.typed.label})" if study.typed.label else ""),
        verdict=verdict,
        sections=sections,
        details=study_details(study),
        links=study_links(study),
        home=study.study_dir,
        source=study,
        generated_by=generated_by(),
    )


def _tested(study: StudyData) -> list[tuple[str, str]]:
    w = study.typed.workload
    w = w if isinstance(w, results.PointsWorkload) else results.PointsWorkload()
    timing = (
        f"{num(w.duration)} s measured + {num(w.warmup)} s warm-up per point, "
        f"backend {w.backend}, {'O_DIRECT' if w.direct is not False else 'buffered'}"
    )
    out = [("points", timing)]
    first = study.first_run()
    if first is not None:
        out += tested_on(first)
    return out


def _num_cell(v: float | None, digits: int | None = None) -> Cell:
    if v is None:
        return Cell("-", "num")
    return Cell(num(v) if digits is None else f"{v:,.{digits}f}", "num")


def _ms_cell(v: float | None) -> Cell:
    return Cell("-" if v is None else f"{v:.3g}", "num")


# ---------------------------------------------------------------------------------------------
# sweep


def _sweep(study: StudyData) -> tuple[Verdict, list[Section]]:
    doc = study.typed
    points = doc.points or []
    measured = [p for p in points if p.get("iops") is not None]
    best_iops = max(measured, key=lambda p: p["iops"], default=None)
    best_mbps = max(measured, key=lambda p: p["mbps"], default=None)

    def at(p: dict[str, Any] | None) -> str:
        return "-" if p is None else f"{format_size(p['bs'])} QD{p['qd']} read {p['read']:g}%"

    facts = [
        ("points", f"{len(measured)} of {len(points)}"),
        ("max IOPS", num(best_iops["iops"]) if best_iops else "-"),
        ("at", at(best_iops)),
        ("max MB/s", num(best_mbps["mbps"]) if best_mbps else "-"),
        ("at", at(best_mbps)),
    ]
    axes = doc.axes or results.SweepAxes()
    varied = ", ".join(doc.varied or []) or "nothing (one point)"
    verdict = Verdict(
        headline=f"Sweep of {counted(len(points), 'point')} over {varied}",
        status="info",
        facts=facts,
        tested=[
            (
                "swept",
                f"IO sizes {', '.join(format_size(b) for b in axes.bs or [])}; QD "  # type: ignore[arg-type]
                f"{', '.join(map(str, axes.qd or []))}; read % "
                f"{', '.join(f'{r:g}' for r in axes.read or [])}; regions "
                f"{', '.join(axes.region or [])}; pattern {doc.pattern}",
            )
        ],
    )
    rows = [
        {
            **p,
            "bs_kib": p["bs"] / 1024,
            "series": _series_name(p, doc.varied or [], ("qd", "read", "region")),
            "by_qd": _series_name(p, doc.varied or [], ("bs", "read", "region")),
        }
        for p in measured
    ]
    items: list[Figure | Table] = []
    if rows:
        items.append(Figure("sweep-size", "IOPS and MB/s vs IO size", sweep_size_chart(rows)))
        items.append(Figure("sweep-qd", "Latency vs queue depth", sweep_qd_chart(rows)))
    items.append(sweep_table(points))
    return verdict, [Section("points", "Points", items)]


def _series_name(p: dict[str, Any], varied: list[str], parts: tuple[str, ...]) -> str:
    """A line's name from what varies in the sweep besides the chart's own axis: 'QD4',
    '64 KiB read 70%'; 'every point' when nothing else varies."""
    words = {
        "qd": f"QD{p['qd']}",
        "bs": format_size(p["bs"]),
        "read": f"read {p['read']:g}%",
        "region": f"region {p['region']}",
    }
    shown = [words[k] for k in parts if k in varied]
    return " ".join(shown) or "every point"


def sweep_size_chart(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    data = dataset(compact(rows, ("bs_kib", "iops", "mbps", "series", "qd", "read", "region")))
    sizes = [r["bs_kib"] for r in rows]
    x_scale = alt.Scale(type="log", base=2, nice=False, domain=[min(sizes), max(sizes)])
    panels = []
    for field, title in (("iops", "IOPS"), ("mbps", "MB/s (10^6 B/s)")):
        panels.append(
            alt.Chart(data)
            .mark_line(point=True)
            .encode(
                x=alt.X(
                    "bs_kib:Q",
                    scale=x_scale,
                    axis=alt.Axis(
                        title="IO size (KiB, log scale)",
                        values=sorted(set(sizes)),
                        format="~g",
                        labelOverlap=True,
                    ),
                ),
                y=alt.Y(f"{field}:Q", title=title),
                color=alt.Color("series:N", title="point"),
                tooltip=[
                    alt.Tooltip("bs_kib:Q", title="KiB"),
                    alt.Tooltip(f"{field}:Q", title=title, format=",.4~g"),
                    alt.Tooltip("series:N", title="point"),
                ],
            )
            .properties(title=f"{title} vs IO size", width=SMALL_WIDTH, height=SMALL_HEIGHT)
        )
    return alt.hconcat(*panels)


def sweep_qd_chart(rows: list[dict[str, Any]]) -> alt.TopLevelMixin:
    """p50 and p99 latency against queue depth: a colour per line of the sweep, a dash per
    percentile, the axis labelled at the queue depths measured."""
    long = []
    for r in rows:
        for stat, name in (("p50_ms", "p50"), ("p99_ms", "p99")):
            if (r.get(stat) or 0) > 0:  # a log axis has no place for 0 (Vega warns)
                long.append({"qd": r["qd"], "ms": r[stat], "line": r["by_qd"], "stat": name})
    data = dataset(compact(long, ("qd", "ms", "line", "stat")))
    qds = sorted({r["qd"] for r in long}) or [1]
    x_scale = alt.Scale(type="log", base=2, nice=False, domain=[min(qds), max(max(qds), 2)])
    lines = _ordered_values(r["line"] for r in long)
    return (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("qd:Q", scale=x_scale, axis=charts.whole_axis(qds, "queue depth (log scale)")),
            y=alt.Y(
                "ms:Q",
                scale=alt.Scale(type="log"),
                axis=charts.log_axis((r["ms"] for r in long), "latency (ms, log scale)"),
            ),
            color=alt.Color("line:N", title="points", sort=lines),
            strokeDash=alt.StrokeDash(
                "stat:N",
                title="percentile",
                sort=["p99", "p50"],
                legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2),
            ),
            tooltip=[
                "qd:Q",
                alt.Tooltip("ms:Q", format=",.4~g"),
                alt.Tooltip("line:N", title="points"),
                alt.Tooltip("stat:N", title="percentile"),
            ],
        )
        .properties(title="p50 and p99 latency vs queue depth", width=charts.WIDTH, height=240)
    )


def _ordered_values(values: Any) -> list[str]:
    seen: list[str] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    return seen


def sweep_table(points: list[dict[str, Any]]) -> Table:
    rows = []
    for i, p in enumerate(points, 1):
        rows.append(
            [
                Cell(str(i), "num"),
                Cell(format_size(p["bs"]), "num"),
                Cell(str(p["qd"]), "num"),
                Cell(f"{p['read']:g}", "num"),
                Cell(p["region"]),
                _num_cell(p.get("iops"), 0),
                _num_cell(p.get("mbps"), 1),
                _ms_cell(p.get("p50_ms")),
                _ms_cell(p.get("p99_ms")),
                _num_cell(p.get("device_iops"), 0),
                _num_cell(p.get("device_util"), 1),
                Cell(p.get("run_id") or "-"),
            ]
        )
    return Table(
        "sweep-points",
        "Every point: what tilemark measured and what the devices did",
        ["point", "IO size", "QD", "read %", "region", "IOPS", "MB/s", "p50 ms", "p99 ms",
         "device IOPS", "device util %", "run"],
        rows,
        caption="Latency is per IO, from submission to completion (closed loop). Device columns: "
        "what the devices serving the target did (/proc/diskstats), blank without telemetry.",
    )  # fmt: skip


# ---------------------------------------------------------------------------------------------
# matrix

MATRICES = (
    ("small_iops", "small IOPS", "IOPS"),
    ("large_mbps", "large MB/s", "MB/s"),
    ("small_latency_ms", "small latency (mean ms)", "ms"),
)


def _matrix(study: StudyData) -> tuple[Verdict, list[Section]]:
    doc = study.typed
    small, large = doc.small_levels or [], doc.large_levels or []
    grids = {
        "small_iops": doc.small_iops or [],
        "large_mbps": doc.large_mbps or [],
        "small_latency_ms": doc.small_latency_ms or [],
    }

    def peak(name: str) -> float | None:
        values = [v for row in grids[name] for v in row if v is not None]
        return max(values) if values else None

    def where(name: str, best: Any) -> str:
        """The cell of a matrix's best value: 'L0/S32' (large streams / small IOs)."""
        for n, row in zip(large, grids[name], strict=False):
            for q, v in zip(small, row, strict=False):
                if v is not None and v == best:
                    return f"L{n}/S{q}"
        return "-"

    lat = [v for row in grids["small_latency_ms"] for v in row if v is not None]
    # The answer, as Orion's summary gives it: the most small IOPS, the most large MB/s and
    # the lowest small-IO latency, each with the cell it came from.
    answers = []
    if peak("small_iops") is not None:
        best = peak("small_iops")
        answers.append(f"max {num(best)} small IOPS ({where('small_iops', best)})")
    if peak("large_mbps") is not None:
        best = peak("large_mbps")
        answers.append(f"max {num(best)} large MB/s ({where('large_mbps', best)})")
    if lat:
        answers.append(
            f"min {min(lat):.3g} ms small latency ({where('small_latency_ms', min(lat))})"
        )
    shape = f"{counted(len(small), 'small-IO level')} x {counted(len(large), 'large-stream level')}"
    verdict = Verdict(
        headline=f"Orion matrix: {', '.join(answers)}" if answers else f"Orion matrix: {shape}",
        status="info",
        facts=[
            ("cells", str(doc.cells_measured)),
            ("max small IOPS", num(peak("small_iops"))),
            ("max large MB/s", num(peak("large_mbps"))),
            ("min small latency ms", "-" if not lat else f"{min(lat):.3g}"),
            ("matrix", shape),
        ],
        tested=[
            (
                "matrix",
                f"small {format_size(doc.small_bs or 0)} random, read "  # type: ignore[arg-type]
                f"{num(doc.small_read)}%, QD {', '.join(map(str, small))}; large "
                f"{format_size(doc.large_bs or 0)} sequential, read "  # type: ignore[arg-type]
                f"{num(doc.large_read)}%, QD {doc.large_qd} per stream, streams "
                f"{', '.join(map(str, large))}",
            )
        ],
    )
    items: list[Figure | Table] = []
    for name, title, unit in MATRICES:
        cells = [
            {"small": str(q), "large": str(n), "value": v}
            for n, row in zip(large, grids[name], strict=False)
            for q, v in zip(small, row, strict=False)
            if v is not None
        ]
        if cells:
            items.append(Figure(f"matrix-{name}", title, heatmap(cells, small, large, title, unit)))
        items.append(matrix_table(name, title, small, large, grids[name]))
    return verdict, [Section("matrix", "Matrices", items)]


def heatmap(
    cells: list[dict[str, Any]], small: list[int], large: list[int], title: str, unit: str
) -> alt.TopLevelMixin:
    """One of Orion's matrices: cells coloured by value and labelled with it in SI units
    ("15.6M", not "1.56e+7"), in white on the darker half of the scale so that no label is
    dark on dark."""
    data = dataset(compact(cells, ("small", "large", "value")))
    values = [c["value"] for c in cells]
    middle = (min(values) + max(values)) / 2 if values else 0
    # Rates in SI units (15.6M); milliseconds as they are (an SI "m" would read as milli-ms).
    shown = ",.3~g" if unit == "ms" else ".3~s"
    base = alt.Chart(data).encode(
        x=alt.X(
            "small:O",
            title="small outstanding IOs",
            sort=[str(q) for q in small],
            axis=alt.Axis(labelAngle=0),
        ),
        y=alt.Y("large:O", title="large streams", sort=[str(n) for n in large]),
    )
    rect = base.mark_rect().encode(
        color=alt.Color(
            "value:Q",
            title=unit,
            scale=alt.Scale(scheme="blues"),
            legend=alt.Legend(format="~g" if unit == "ms" else "~s"),
        ),
        tooltip=["small:O", "large:O", alt.Tooltip("value:Q", title=unit, format=",.4~g")],
    )
    text = base.mark_text(fontSize=11).encode(
        text=alt.Text("value:Q", format=shown),
        color=alt.condition(f"datum.value > {middle!r}", alt.value("white"), alt.value("#1f2328")),
    )
    return alt.layer(rect, text).properties(title=title, width=SMALL_WIDTH, height=SMALL_HEIGHT)


def matrix_table(
    name: str, title: str, small: list[int], large: list[int], grid: list[list[float | None]]
) -> Table:
    rows = []
    for n, row in zip(large, grid, strict=False):
        cells = [Cell(str(n), "num")]
        for v in row:
            cells.append(_ms_cell(v) if name == "small_latency_ms" else _num_cell(v, 0))
        rows.append(cells)
    return Table(
        f"matrix-{name}-table",
        f"{title}: rows are large streams, columns small outstanding IOs",
        ["large \\ small", *map(str, small)],
        rows,
        caption=f"Also in {name}.csv in the study directory.",
    )


# ---------------------------------------------------------------------------------------------
# curve


def _curve(study: StudyData) -> tuple[Verdict, list[Section]]:
    doc = study.typed
    points = doc.points or []
    knee = doc.knee
    facts = [
        ("max IOPS", num(doc.max_iops)),
        ("at QD", str(doc.qd_at_max or "-")),
        ("knee", "-" if not knee else f"{num(knee['iops'])} IOPS ({knee['offered_pct']:g}%)"),
    ]
    notes = [f"knee rule: {doc.knee_rule}"]
    headline = f"Maximum {num(doc.max_iops)} IOPS"
    status = "info"
    if doc.slo:
        if doc.slo_iops is None:
            headline += f"; no offered rate meets {doc.slo}"
            status = "fail"
        else:
            headline += f"; {num(doc.slo_iops)} IOPS at {doc.slo}"
            status = "pass"
        facts.append(("SLO", f"{num(doc.slo_iops)} IOPS at {doc.slo}"))
        notes.append(
            f"the SLO search bisects between passing and failing rates to "
            f"{num(doc.slo_precision_pct)}% of the maximum; each latency bound is judged "
            "by its 95% confidence interval, and the offered rate must be delivered"
        )
    verdict = Verdict(
        headline=headline,
        status=status,
        facts=facts,
        notes=notes,
        tested=[
            (
                "curve",
                f"stream {study.doc.get('stream')}, arrivals {study.doc.get('arrival')}, loads "
                f"{', '.join(f'{x:g}' for x in doc.loads_pct or [])}% of the maximum",
            )
        ],
    )
    items: list[Figure | Table] = []
    open_loop = [p for p in points if p["phase"] != "max" and p.get("iops") is not None]
    if open_loop:
        items.append(
            Figure(
                "curve",
                "Response time vs achieved IOPS",
                curve_chart(open_loop, knee, doc.slo_iops, doc.max_iops, _slo_limits(doc.slo)),
                caption="Response time counts queueing from each IO's scheduled arrival.",
            )
        )
    items.append(curve_table(points))
    return verdict, [Section("curve", "Load/latency curve", items)]


def _slo_limits(slo: str | None) -> list[dict[str, Any]]:
    """The objective's percentile bounds as horizontal lines: {"ms", "label"}."""
    out = []
    for part in (slo or "").split(","):
        stat, _, limit = part.partition("<=")
        if stat in ("p50", "p99", "p999") and limit.endswith("ms"):
            out.append({"ms": float(limit[:-2]), "label": f"SLO {stat} <= {limit}"})
    return out


def curve_chart(
    points: list[dict[str, Any]],
    knee: dict[str, Any] | None,
    slo_iops: float | None,
    max_iops: float | None,
    limits: list[dict[str, Any]] | None = None,
) -> alt.TopLevelMixin:
    long = []
    for p in points:
        for stat, label in (("p50_ms", "p50"), ("p99_ms", "p99"), ("p999_ms", "p99.9")):
            if (p.get(stat) or 0) > 0:  # a log axis has no place for 0 (Vega warns)
                long.append(
                    {
                        "iops": p["iops"],
                        "ms": p[stat],
                        "stat": label,
                        "phase": p["phase"],
                        "offered": p.get("offered_iops"),
                    }
                )
    data = dataset(compact(long, ("iops", "ms", "stat", "phase", "offered")))
    lines = (
        alt.Chart(data)
        .mark_line(point=True)
        .encode(
            x=alt.X("iops:Q", title="achieved IOPS", axis=alt.Axis(labelOverlap=True)),
            y=alt.Y(
                "ms:Q",
                scale=alt.Scale(type="log"),
                axis=charts.log_axis(
                    [r["ms"] for r in long] + [lim["ms"] for lim in limits or []],
                    "response time (ms, log scale)",
                ),
            ),
            color=alt.Color("stat:N", title="percentile", sort=["p50", "p99", "p99.9"]),
            order="iops:Q",
            tooltip=[
                alt.Tooltip("iops:Q", format=",.0f"),
                alt.Tooltip("offered:Q", title="offered IOPS", format=",.0f"),
                alt.Tooltip("ms:Q", format=",.4~g"),
                "stat:N",
                "phase:N",
            ],
        )
    )
    layers: list[Any] = [lines]
    marks = []
    if knee:
        marks.append(
            {"iops": knee["iops"], "label": f"knee {num(knee['iops'])}", "color": "purple"}
        )
    if slo_iops is not None:
        marks.append({"iops": slo_iops, "label": f"SLO answer {num(slo_iops)}", "color": "green"})
    if max_iops is not None:
        marks.append(
            {"iops": max_iops, "label": f"max {num(max_iops)} (closed loop)", "color": "brown"}
        )
    layers += charts.marker_layers(marks, field="iops")
    if limits:
        # The objective's bounds: labelled at the right end, above their line (the marker
        # labels stand at the top, the axis at the left).
        lim = alt.Chart(dataset(compact(limits, ("ms", "label"))))
        layers.append(lim.mark_rule(strokeDash=[2, 2], color="#c62828").encode(y="ms:Q"))
        layers.append(
            lim.mark_text(align="right", baseline="bottom", dx=-4, dy=-3, fontSize=10,
                          color="#c62828")
            .encode(y="ms:Q", x=alt.value(charts.WIDTH), text="label:N")
        )  # fmt: skip
    title = "Response time percentiles vs achieved IOPS"
    subtitle = charts.marker_subtitle(marks)
    return alt.layer(*layers).properties(
        title=alt.TitleParams(title, subtitle=subtitle) if subtitle else title,
        width=charts.WIDTH,
        height=280,
    )


def curve_table(points: list[dict[str, Any]]) -> Table:
    phases = {"max": "closed loop", "load": "offered load", "slo": "SLO search"}
    rows = []
    for i, p in enumerate(points, 1):
        verdict = p.get("verdict")
        rows.append(
            [
                Cell(str(i), "num"),
                Cell(phases.get(p["phase"], p["phase"])),
                Cell(str(p["qd"]), "num"),
                _num_cell(p.get("offered_pct"), 1),
                _num_cell(p.get("offered_iops"), 0),
                _num_cell(p.get("iops"), 0),
                _ms_cell(p.get("p50_ms")),
                _ms_cell(p.get("p99_ms")),
                _ms_cell(p.get("p999_ms")),
                Cell(verdict or "-", {"pass": "pass", "fail": "fail"}.get(verdict or "", "")),
                _num_cell(p.get("device_iops"), 0),
                _num_cell(p.get("device_util"), 1),
                Cell(p.get("run_id") or "-"),
            ]
        )
    return Table(
        "curve-points",
        "Every step: the search for the maximum, the offered loads, the SLO search",
        ["step", "phase", "QD", "offered %", "offered IOPS", "IOPS", "p50 ms", "p99 ms",
         "p99.9 ms", "SLO", "device IOPS", "device util %", "run"],
        rows,
        caption="Open-loop QD is the cap on IOs in flight; IOs beyond it wait in the schedule "
        "and their wait counts in the response time.",
    )  # fmt: skip
