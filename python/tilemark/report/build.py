"""Assemble Reports from stored runs and studies: verdict first, then charts and tables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import tilemark
from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import (
    RunData,
    SeriesSet,
    Source,
    StudyData,
    compute_series,
    distribution_rows,
    latency_stats_ms,
    merged_run_hist,
    run_groups,
)
from tilemark.units import format_size

# Groups drawn individually in a latency distribution plot; more are merged into one line.
MAX_DISTRIBUTION_GROUPS = 12


# ---------------------------------------------------------------------------------------------
# formatting


def num(value: float | None, digits: int | None = None) -> str:
    """1,234 / 12.3 / 0.123 / '-'."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if digits is not None:
        return f"{value:,.{digits}f}"
    a = abs(value)
    if a >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    if a >= 10:
        return f"{value:.1f}"
    if a >= 0.1:
        return f"{value:.2f}"
    return f"{value:.3g}"


def ms(value: float | None) -> str:
    return "-" if value is None else f"{num(value)} ms"


def _mark(passed: bool) -> Cell:
    return Cell("pass", "pass") if passed else Cell("FAIL", "fail")


def describe_stream(s: dict[str, Any]) -> str:
    """One line per plan stream: mix, sizes, pattern, queue depth, arrival."""
    sizes = s.get("sizes") or []
    if len(sizes) == 1:
        size_text = format_size(sizes[0][0])
    else:
        size_text = "mix " + "/".join(format_size(sz) for sz, _ in sizes)
    pattern = (s.get("pattern") or {}).get("kind", "?")
    arrival = s.get("arrival") or {}
    if arrival.get("kind") == "open":
        rate = (
            f"{num(arrival['rate_iops'])} IOPS"
            if arrival.get("rate_iops")
            else f"{num((arrival.get('rate_bps') or 0) / 1e6)} MB/s"
        )
        arrival_text = f"open loop {rate} {arrival.get('dist', '')}".strip()
    else:
        arrival_text = "closed loop"
    sync = (s.get("sync") or {}).get("kind", "none")
    sync_text = "" if sync == "none" else f", {sync}"
    return (
        f"{s.get('name')}: {num(s.get('read_pct', 0))}% read, {size_text}, {pattern}, "
        f"qd {s.get('qd')}, {arrival_text}{sync_text}"
    )


def _device_text(target: dict[str, Any]) -> tuple[str, str]:
    dev = target.get("device") or {}
    if not dev:
        return "device", "none (no block device under the target)"
    kind = {True: "rotational", False: "non-rotational"}.get(dev.get("rotational"), "")
    model = " ".join(x for x in (dev.get("vendor"), dev.get("model")) if x)
    size = format_size(dev["size_bytes"]) if dev.get("size_bytes") else ""
    parts = [
        f"{dev.get('dev_path') or dev.get('name')}",
        model,
        dev.get("transport") or "",
        kind,
        size,
    ]
    return "device", ", ".join(p for p in parts if p)


def tested_on(run: RunData) -> list[tuple[str, str]]:
    """What and where: host, kernel, device, filesystem, scheduler, tilemark version."""
    env = run.environment
    out: list[tuple[str, str]] = []
    for t in env.get("targets") or [{"path": t.get("path")} for t in run.doc.get("targets", [])]:
        fs = ", ".join(
            x
            for x in (
                t.get("fs_type"),
                f"mounted at {t['mount_point']}" if t.get("mount_point") else None,
                f"from {t['mount_source']}" if t.get("mount_source") else None,
            )
            if x
        )
        out.append(("target", f"{t.get('path')} ({t.get('kind') or 'unknown kind'})"))
        out.append(("filesystem", fs or "-"))
        out.append(_device_text(t))
        dev = t.get("device") or {}
        out.append(("IO scheduler", dev.get("scheduler") or "-"))
    mem = env.get("memory_bytes")
    cpu = env.get("cpu_model") or "-"
    cpus = env.get("cpu_usable") or env.get("cpu_count")
    out.append(
        (
            "host",
            f"{env.get('hostname') or '-'}: {cpu}"
            + (f", {cpus} CPUs" if cpus else "")
            + (f", {format_size(mem)} RAM" if mem else ""),
        )
    )
    out.append(("kernel", " ".join(x for x in (env.get("kernel"), env.get("os")) if x) or "-"))
    plan = run.plan
    io = "O_DIRECT" if all(t.get("direct") for t in plan.get("targets", [])) else "buffered"
    out.append(("engine", f"{plan.get('backend', '-')} backend, {io}"))
    out.append(
        (
            "tilemark",
            f"{run.doc.get('tilemark_version') or '-'}"
            + (f" (engine {run.doc['engine_version']})" if run.doc.get("engine_version") else ""),
        )
    )
    out.append(("started", str(run.doc.get("started_at") or "-")))
    return out


def _links(run: RunData) -> list[tuple[str, Path]]:
    out = [(f"{run.run_id}/run.json", run.run_dir / "run.json")]
    path = run.intervals_path()
    if path.exists():
        out.append((f"{run.run_id}/{path.name}", path))
    return out


def _details(run: RunData) -> dict[str, Any]:
    return {
        "environment": run.environment,
        "workload": run.doc.get("workload"),
        "plan": run.plan,
        "targets": run.doc.get("targets"),
        "command line": run.doc.get("argv"),
    }


def _generated() -> str:
    return f"tilemark {tilemark.__version__}"


# ---------------------------------------------------------------------------------------------
# runs


def run_headline(run: RunData) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """Headline sentence, status, big numbers and notes of a run."""
    doc = run.doc
    summary = run.summary or {}
    total = summary.get("total") or {}
    notes = []
    status = "info"
    if doc.get("status") != "complete":
        status = "warn" if doc.get("status") != "failed" else "fail"
        notes.append(
            f"run status: {doc.get('status')}"
            + (f": {doc['error']}" if doc.get("error") else "")
            + " (measurements cover what completed)"
        )
    if total.get("errors"):
        status = "warn" if status == "info" else status
        notes.append(f"{total['errors']:,} IOs failed; they are not in IOPS, MB/s or latency")
    read = merged_run_hist(run, None, "read")
    write = merged_run_hist(run, None, "write")
    facts = [
        ("IOPS", num(total.get("iops"))),
        ("MB/s", num(total.get("mbps"))),
        ("read p99", ms(latency_stats_ms(read)["p99"]) if read.n else "-"),
        ("write p99", ms(latency_stats_ms(write)["p99"]) if write.n else "-"),
        ("measured", f"{num(summary.get('duration_s'))} s"),
        ("errors", num(total.get("errors", 0))),
    ]
    apps = run.applications
    name = (doc.get("workload") or {}).get("name") or "workload"
    if apps is not None:
        verdict = "PASS" if apps["passed"] else "FAIL"
        status = "pass" if apps["passed"] and status == "info" else "fail"
        if not apps["passed"]:
            status = "fail"
        score = f", score {apps['score']:.2f}" if apps.get("score") is not None else ""
        failed = len(apps.get("failed") or [])
        headline = (
            f"{apps['tiles']} tile(s) of {(apps.get('layout') or {}).get('tile', name)}: "
            f"QoS {verdict}{score}"
            + (f" ({failed} criteria failed)" if failed else " (every application passes)")
        )
        facts = [
            ("tiles", str(apps["tiles"])),
            ("QoS", verdict),
            ("score", num(apps.get("score"))),
            *facts,
        ]
    else:
        headline = (
            f"{name}: {num(total.get('iops'))} IOPS, {num(total.get('mbps'))} MB/s"
            + (f", read p99 {ms(latency_stats_ms(read)['p99'])}" if read.n else "")
            + (f", write p99 {ms(latency_stats_ms(write)['p99'])}" if write.n else "")
            + f" over {num(summary.get('duration_s'))} s"
        )
    return headline, status, facts, notes


def criteria_table(run: RunData) -> Table | None:
    """Pass/fail of every QoS criterion of every application instance."""
    apps = run.applications
    if apps is None:
        return None
    rows = []
    for inst in apps["instances"]:
        by_criterion: dict[str, list[dict]] = {}
        for v in inst.get("verdicts", []):
            by_criterion.setdefault(v["criterion"], []).append(v)
        for verdicts in by_criterion.values():
            window = next((v for v in verdicts if v["scope"] == "window"), verdicts[0])
            intervals = [v for v in verdicts if v["scope"] != "window"]
            failed_intervals = [v for v in intervals if not v["passed"]]
            passed = all(v["passed"] for v in verdicts)
            rows.append(
                [
                    Cell(str(inst["tile"]), "num"),
                    Cell(inst["app"]),
                    Cell(window["description"]),
                    Cell(_value(window), "num"),
                    Cell(_limit(window), "num"),
                    Cell(
                        f"{len(failed_intervals)} of {len(intervals)} failed" if intervals else "-",
                        "fail" if failed_intervals else "",
                    ),
                    _mark(passed),
                ]
            )
    return Table(
        "qos",
        "QoS criteria per application instance",
        ["tile", "application", "criterion", "measured (window)", "limit", "QoS intervals", "QoS"],
        rows,
        caption=(
            f"Latency criteria use response time (from the intended issue time). Per-interval "
            f"criteria are also checked in each {num(apps.get('qos_interval_s'))} s QoS interval."
        ),
    )


def _value(v: dict) -> str:
    if v.get("value") is None:
        return "-"
    if v["unit"] == "fraction":
        return f"{v['value']:.1%} of target"
    if v["unit"] == "ms":
        return f"{v['value']:.2f} ms"
    return f"{num(v['value'])} {v['unit']}"


def _limit(v: dict) -> str:
    if v["unit"] == "fraction":
        return f">= {v['limit']:.0%}"
    if v["unit"] == "ms":
        return f"<= {v['limit']:g} ms"
    return f"{v['limit']:g} {v['unit']}"


def applications_tables(run: RunData) -> list[Table]:
    """The seeds' tables: per application (summed over tiles) and per instance."""
    apps = run.applications
    if apps is None:
        return []
    per_app = []
    for a in apps["applications"]:
        lat = ", ".join(f"{cid} {num(v)} ms" for cid, v in a["worst_latency_ms"].items())
        targets = [
            i["target_metric"]
            for i in apps["instances"]
            if i["app"] == a["app"] and i.get("target_metric") is not None
        ]
        per_app.append(
            [
                Cell(a["app"]),
                Cell(str(a["instances"]), "num"),
                Cell(f"{num(a['metric_total'])} {a['metric_unit']}", "num"),
                Cell(num(sum(targets)) if targets else "-", "num"),
                Cell(lat or "-"),
                Cell(num(a["iops"]), "num"),
                Cell(num(a["mbps"]), "num"),
                _mark(a["passed"]),
            ]
        )
    instances = []
    for i in apps["instances"]:
        instances.append(
            [
                Cell(str(i["tile"]), "num"),
                Cell(i["app"]),
                Cell(f"{num(i['metric'])} {i['metric_unit']}", "num"),
                Cell(num(i.get("target_metric")), "num"),
                Cell(", ".join(f"{c} {num(v)} ms" for c, v in i["latency_ms"].items()) or "-"),
                Cell(num(i["iops"]), "num"),
                Cell(num(i["mbps"]), "num"),
                Cell(num(i["errors"]), "fail" if i["errors"] else "num"),
                _mark(i["passed"]),
            ]
        )
    return [
        Table(
            "applications",
            "Per application (all tiles)",
            [
                "application",
                "instances",
                "metric",
                "target",
                "worst latency (QoS)",
                "IOPS",
                "MB/s",
                "QoS",
            ],
            per_app,
            caption="Metrics in each application's own unit; MB/s = 10^6 bytes/s.",
        ),
        Table(
            "instances",
            "Per application instance",
            [
                "tile",
                "application",
                "metric",
                "target",
                "latency (QoS)",
                "IOPS",
                "MB/s",
                "errors",
                "QoS",
            ],
            instances,
        ),
    ]


def streams_table(run: RunData) -> Table:
    """Per stream: rates and read/write latency (mean, p50, p99, p99.9, max) of the run."""
    summary = run.summary or {}
    apps = run.app_of_stream()
    rows = []
    for s in summary.get("streams", []):

        def lat(op: str, s: dict = s) -> str:
            o = s.get(op)
            if not o or not o.get("response") or o["response"].get("mean_ms") is None:
                return "-"
            r = o["response"]
            return " / ".join(num(r[k]) for k in ("mean_ms", "p50_ms", "p99_ms", "p999_ms"))

        rows.append(
            [
                Cell(s["name"]),
                *([Cell(apps.get(s["stream"], "-"))] if apps else []),
                Cell(
                    "closed" if s["arrival"] == "closed" else f"open {num(s.get('target_iops'))}/s"
                ),
                Cell(num(s["total"]["iops"]), "num"),
                Cell(num(s["total"]["mbps"]), "num"),
                Cell(lat("read"), "num"),
                Cell(lat("write"), "num"),
                Cell(num(s.get("lag_max_ms")), "num"),
                Cell(num(s.get("ios_issued_late")), "num"),
                Cell(
                    num(
                        sum(
                            sum((s.get(k) or {}).get("errors", {}).values())
                            for k in ("read", "write", "sync")
                        )
                    ),
                    "num",
                ),
            ]
        )
    return Table(
        "streams",
        "Per stream (measurement phase)",
        [
            "stream",
            *(["application"] if apps else []),
            "arrival",
            "IOPS",
            "MB/s",
            "read ms mean/p50/p99/p99.9",
            "write ms mean/p50/p99/p99.9",
            "max lag ms",
            "late IOs",
            "errors",
        ],
        rows,
        caption=(
            "Latency is response time (from the intended issue time) for open loop and service "
            "time for closed loop, from the engine's histograms (relative error <= 1/128)."
        ),
    )


def _has_svc(series: SeriesSet, level: str, groups: set[str] | None = None) -> bool:
    opened = series.open_loop.get(level, set())
    return bool(opened if groups is None else opened & groups)


def time_series_sections(run: RunData, series: SeriesSet, prefix: str = "") -> list[Section]:
    """Throughput and latency over time, per application (tile runs) and per stream."""
    warm = series.warmup_s
    sections = []
    per = series.intervals_per_point
    stream_rows = series.rows.get("stream", [])
    note = (
        f"{series.intervals} intervals; each point merges {per.get('total', 1)} interval(s)"
        + (
            f" ({per['stream']} per point for single streams)"
            if per.get("stream", 1) != per.get("total", 1)
            else ""
        )
        + ": rates are sums over the merged intervals, percentiles come from merged "
        "histograms. Grey band: warm-up (not in the summary)."
    )
    if run.is_tile_run:
        app_rows = series.rows.get("app", [])
        items: list[Figure | Table] = [
            Figure(
                f"{prefix}apps-mbps",
                "MB/s per application (stacked)",
                charts.throughput_over_time(
                    app_rows,
                    field="mbps",
                    y_title="MB/s (10^6 B/s)",
                    title="MB/s per application (stacked)",
                    warmup_s=warm,
                    group_title="application",
                    stacked=True,
                ),
            ),
            Figure(
                f"{prefix}apps-iops",
                "IOPS per application (stacked)",
                charts.throughput_over_time(
                    app_rows,
                    field="iops",
                    y_title="IOPS",
                    title="IOPS per application (stacked)",
                    warmup_s=warm,
                    group_title="application",
                    stacked=True,
                ),
            ),
            Figure(
                f"{prefix}apps-latency",
                "Response time per application",
                charts.latency_over_time(
                    app_rows,
                    stats=["p99", "p50"],
                    title="Response time p50 / p99 per application (reads and writes)",
                    warmup_s=warm,
                    group_title="application",
                ),
            ),
        ]
        if _has_svc(series, "app"):
            items.append(
                Figure(
                    f"{prefix}apps-service",
                    "Service time per application",
                    charts.latency_over_time(
                        app_rows,
                        stats=["svc_p99", "svc_p50"],
                        title="Service time p50 / p99 per application (submission to completion)",
                        warmup_s=warm,
                        group_title="application",
                    ),
                )
            )
        sections.append(Section(f"{prefix}apps-time", "Applications over time", items, note))
    else:
        totals: list[Figure | Table] = []
        total_rows = series.rows.get("total", [])
        if len(run.stream_names) > 1:
            totals = [
                Figure(
                    f"{prefix}total-throughput",
                    "Total IOPS and MB/s",
                    charts.throughput_over_time(
                        total_rows,
                        field="iops",
                        y_title="IOPS",
                        title="Total IOPS (all streams)",
                        warmup_s=warm,
                        group_title="streams",
                    )
                    & charts.throughput_over_time(
                        total_rows,
                        field="mbps",
                        y_title="MB/s (10^6 B/s)",
                        title="Total MB/s (all streams)",
                        warmup_s=warm,
                        group_title="streams",
                    ),
                ),
                Figure(
                    f"{prefix}total-latency",
                    "Latency of all streams",
                    charts.latency_over_time(
                        total_rows,
                        stats=["p99", "p50"]
                        + (["svc_p99", "svc_p50"] if _has_svc(series, "total") else []),
                        title="Response time p50 / p99 of all streams (merged histograms)",
                        warmup_s=warm,
                        group_title="streams",
                    ),
                ),
            ]
        sections.append(Section(f"{prefix}time", "Over time", totals, note))
    stats = ["p99", "p50"] + (["svc_p99", "svc_p50"] if _has_svc(series, "stream") else [])
    many = len({r["group"] for r in stream_rows}) > charts.MAX_LINES
    stream_items: list[Figure | Table] = [
        Figure(
            f"{prefix}streams-iops",
            "IOPS per stream",
            charts.throughput_over_time(
                stream_rows,
                field="iops",
                y_title="IOPS",
                title="IOPS per stream",
                warmup_s=warm,
                order=run.stream_names,
            ),
        ),
        Figure(
            f"{prefix}streams-mbps",
            "MB/s per stream",
            charts.throughput_over_time(
                stream_rows,
                field="mbps",
                y_title="MB/s (10^6 B/s)",
                title="MB/s per stream",
                warmup_s=warm,
                order=run.stream_names,
            ),
        ),
        Figure(
            f"{prefix}streams-latency",
            "Latency per stream",
            charts.latency_over_time(
                stream_rows,
                stats=stats,
                title="Response time p50 / p99 per stream"
                + (" (service time where it differs: open loop)" if len(stats) > 2 else ""),
                warmup_s=warm,
                order=run.stream_names,
            ),
            caption="Pick a stream in the list under the chart." if many else "",
        ),
    ]
    if run.is_tile_run:
        sections.append(Section(f"{prefix}streams-time", "Streams over time", stream_items))
    else:
        sections[-1].items.extend(stream_items)
    return sections


def distribution_figure(run: RunData, fig_id: str = "latency-distribution") -> Figure:
    groups = run_groups(run)
    title_group = "application" if run.is_tile_run else "stream"
    if len(groups) > MAX_DISTRIBUTION_GROUPS:
        groups = {"all streams": [i for s in groups.values() for i in s]}
    rows = distribution_rows(run, groups)
    return Figure(
        fig_id,
        "Latency distribution",
        charts.percentile_plot(
            rows,
            title=f"Response time percentiles per {title_group} (measurement phase)",
            group_title=title_group,
        ),
        caption=(
            "From the run's histograms merged over streams and time (never averaged "
            "percentiles); response time for open loop, service time for closed loop."
        ),
    )


def run_report(run: RunData) -> Report:
    """The report of one run (a plain run or a tile run)."""
    headline, status, facts, notes = run_headline(run)
    verdict = Verdict(
        headline=headline,
        status=status,
        facts=facts,
        tested=[
            ("workload", (run.doc.get("workload") or {}).get("name") or "-"),
            *[("stream", describe_stream(s)) for s in run.plan.get("streams", [])[:8]],
            *(
                [("streams", f"... and {len(run.plan['streams']) - 8} more (see Details)")]
                if len(run.plan.get("streams", [])) > 8
                else []
            ),
            *tested_on(run),
        ],
        notes=notes,
        criteria=criteria_table(run),
    )
    sections: list[Section] = []
    if run.is_tile_run:
        sections.append(Section("applications", "Applications", applications_tables(run)))
    if run.intervals_path().exists() or (run.run_dir / "intervals.parts").is_dir():
        series = compute_series(run)
        sections.extend(time_series_sections(run, series))
    sections.append(
        Section(
            "distribution",
            "Latency distribution",
            [distribution_figure(run), streams_table(run)],
        )
    )
    kind = "tiles" if run.is_tile_run else "run"
    return Report(
        kind=kind,
        title=f"tilemark report: run {run.run_id}",
        verdict=verdict,
        sections=sections,
        details=_details(run),
        links=_links(run),
        home=run.run_dir,
        source=run,
        generated_by=_generated(),
    )


# ---------------------------------------------------------------------------------------------
# studies


def _qos_limits(study: StudyData) -> dict[tuple[str, str], float]:
    out = {}
    for a in study.doc.get("tile", {}).get("applications", []):
        for c in a.get("qos", []):
            if c.get("max_ms") is not None:
                out[(a["app"], c["id"])] = float(c["max_ms"])
    return out


def study_rows(study: StudyData) -> dict[str, list[dict[str, Any]]]:
    """Plain rows of a study for charts and tables: totals, app metrics, latencies."""
    totals, metrics, latency, shares = [], [], [], []
    limits = _qos_limits(study)
    for st in study.steps:
        step = st.step
        verdict = "pass" if step["passed"] else "fail"
        total = step.get("total") or {}
        totals.append(
            {
                "tiles": st.tiles,
                "iops": total.get("iops"),
                "mbps": total.get("mbps"),
                "score": step.get("score"),
                "verdict": verdict,
            }
        )
        targets: dict[str, float] = {}
        for inst in step.get("instances", []):
            if inst.get("target_metric") is not None:
                targets[inst["app"]] = targets.get(inst["app"], 0.0) + inst["target_metric"]
        for a in step.get("applications", []):
            metrics.append(
                {
                    "app": a["app"],
                    "tiles": st.tiles,
                    "metric": a["metric_total"],
                    "target": targets.get(a["app"]),
                    "unit": a["metric_unit"],
                    "verdict": "pass" if a["passed"] else "fail",
                }
            )
            shares.append({"tiles": st.tiles, "group": a["app"], "mbps": a["mbps"]})
            shares[-1]["iops"] = a["iops"]
            for cid, v in (a.get("worst_latency_ms") or {}).items():
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                latency.append(
                    {
                        "app": a["app"],
                        "criterion": cid,
                        "tiles": st.tiles,
                        "latency_ms": v,
                        "limit_ms": limits.get((a["app"], cid)),
                    }
                )
    return {"totals": totals, "metrics": metrics, "latency": latency, "shares": shares}


def study_table(study: StudyData) -> Table:
    """Seed tables 1-3: per tile count, each application's metric and QoS latencies."""
    apps = [a["app"] for a in study.doc.get("tile", {}).get("applications", [])]
    columns = ["tiles"]
    lat_ids: dict[str, list[str]] = {}
    for st in study.steps:
        for a in st.step.get("applications", []):
            lat_ids.setdefault(a["app"], [])
            for cid in a.get("worst_latency_ms") or {}:
                if cid not in lat_ids[a["app"]]:
                    lat_ids[a["app"]].append(cid)
    for app in apps:
        columns.append(app)
        columns += [f"{app} {cid} (ms)" for cid in lat_ids.get(app, [])]
    columns += ["IOPS", "MB/s", "score", "QoS"]
    rows = []
    for st in study.steps:
        by_app = {a["app"]: a for a in st.step.get("applications", [])}
        row = [Cell(str(st.tiles), "num")]
        for app in apps:
            a = by_app.get(app)
            if a is None:
                row += [Cell("-")] * (1 + len(lat_ids.get(app, [])))
                continue
            row.append(
                Cell(
                    f"{num(a['metric_total'])} {a['metric_unit']}", "num" if a["passed"] else "fail"
                )
            )
            for cid in lat_ids.get(app, []):
                row.append(Cell(num((a.get("worst_latency_ms") or {}).get(cid)), "num"))
        total = st.step.get("total") or {}
        row += [
            Cell(num(total.get("iops")), "num"),
            Cell(num(total.get("mbps")), "num"),
            Cell(num(st.step.get("score")), "num"),
            _mark(st.step["passed"]),
        ]
        rows.append(row)
    return Table(
        "study-table",
        "Per tile count: application metrics and QoS latencies",
        columns,
        rows,
        caption="A failing application's metric is marked red; latencies are the worst instance.",
    )


def steps_table(study: StudyData, home: Path) -> Table:
    from tilemark.report.data import relpath

    rows = []
    for st in study.steps:
        run_dir = st.run.run_dir if st.run else None
        rows.append(
            [
                Cell(str(st.tiles), "num"),
                Cell(st.step["run_id"]),
                Cell(relpath(run_dir, home) if run_dir else "(run directory missing)"),
                _mark(st.step["passed"]),
                Cell("; ".join(st.step.get("failed", [])[:4]) or "-"),
            ]
        )
    return Table(
        "steps",
        "Steps (one stored run each; `tilemark report RUN_ID` shows one in detail)",
        ["tiles", "run", "directory", "QoS", "failed criteria (first 4)"],
        rows,
    )


def study_distribution(study: StudyData) -> Figure | None:
    """Per application: response-time percentiles of each tile count's merged histograms."""
    rows = []
    for st in study.steps:
        if st.run is None:
            continue
        for app, streams in run_groups(st.run).items():
            for r in distribution_rows(st.run, {app: streams}):
                rows.append({**r, "group": f"{app} @ {st.tiles} tiles", "app": app})
    if not rows:
        return None
    apps = charts._ordered(r["app"] for r in rows)
    import altair as alt

    plots = []
    for app in apps:
        mine = [r for r in rows if r["app"] == app]
        plots.append(
            charts.percentile_plot(mine, title=app, group_title="tile count").properties(
                width=charts.SMALL_WIDTH, height=charts.SMALL_HEIGHT
            )
        )
    return Figure(
        "study-distribution",
        "Latency distribution per application and tile count",
        alt.concat(*plots, columns=2).properties(
            title="Response time percentiles per application at each tile count"
        ),
        caption="Merged histograms of every instance of the application at that tile count.",
    )


def study_report(study: StudyData) -> Report:
    """The report of a scaling study: capacity, scaling charts, per-tile-count tables."""
    doc = study.doc
    best = doc.get("max_passing_tiles")
    first = doc.get("first_failure")
    tile = doc.get("tile", {})
    if best is None:
        headline = "No tile count passes QoS"
        status = "fail"
    else:
        score = f", score {doc['score_at_max']:.2f}" if doc.get("score_at_max") is not None else ""
        headline = f"Max passing tiles: {best}{score}"
        status = "pass"
    if not doc.get("complete", True):
        status = "warn"
    best_step = study.step_at(best)
    at_best = (best_step.step.get("total") if best_step else None) or {}
    facts = [
        ("max passing tiles", str(best) if best is not None else "none"),
        ("score at max", num(doc.get("score_at_max"))),
        ("IOPS at max", num(at_best.get("iops"))),
        ("MB/s at max", num(at_best.get("mbps"))),
        ("first failure", f"{first['tiles']} tiles" if first else "none"),
        ("runs", str(doc.get("runs_used", len(study.steps)))),
    ]
    notes = []
    if first:
        notes.append(
            f"first failing count ({first['tiles']} tiles): " + "; ".join(first["failed"][:6])
        )
    if not doc.get("complete", True):
        notes.append("the study was interrupted: the steps so far are shown")
    tested = [
        (
            "tile",
            f"{tile.get('name')}: "
            + ", ".join(
                f"{a['app']} ({', '.join(f'{k} {v:g}' for k, v in a.get('scale', {}).items())})"
                for a in tile.get("applications", [])
            ),
        ),
        (
            "study",
            f"{doc.get('mode')} over {doc.get('tile_counts')} tiles, "
            f"{doc.get('duration')} s measured + {doc.get('warmup')} s warm-up per step, "
            f"QoS interval {num(doc.get('qos_interval_s'))} s",
        ),
    ]
    first_run = study.first_run()
    if first_run is not None:
        tested += tested_on(first_run)
    crit_rows = []
    for st in study.steps:
        for a in st.step.get("applications", []):
            failed = [
                f.split(": ", 1)[1]
                for f in st.step.get("failed", [])
                if f.split(": ", 1)[0].split(".", 1)[-1] == a["app"]
            ]
            crit_rows.append(
                [
                    Cell(str(st.tiles), "num"),
                    Cell(a["app"]),
                    _mark(a["passed"]),
                    Cell("; ".join(dict.fromkeys(failed)) or "-"),
                ]
            )
    verdict = Verdict(
        headline=headline,
        status=status,
        facts=facts,
        tested=tested,
        notes=notes,
        criteria=Table(
            "qos",
            "QoS per tile count and application",
            ["tiles", "application", "QoS", "failed criteria"],
            crit_rows,
        ),
    )
    data = study_rows(study)
    scaling: list[Figure | Table] = [
        Figure(
            "scaling-totals",
            "Total throughput vs tiles",
            charts.scaling_totals(
                data["totals"],
                max_passing=best,
                first_failure=first["tiles"] if first else None,
                title="Total IOPS, MB/s and score vs tile count (saturation marked)",
            ),
        ),
        Figure(
            "scaling-metric",
            "Application metrics vs tiles",
            charts.scaling_metric(data["metrics"], title="Application metrics vs tile count"),
        ),
    ]
    if data["latency"]:
        scaling.append(
            Figure(
                "scaling-latency",
                "Latency vs tiles",
                charts.scaling_latency(
                    data["latency"], title="QoS latencies vs tile count (worst instance)"
                ),
            )
        )
    scaling.append(
        Figure(
            "scaling-share",
            "Throughput per application vs tiles",
            charts.stacked_bars(
                data["shares"],
                x="tiles",
                x_title="tiles",
                field="mbps",
                y_title="MB/s (10^6 B/s)",
                title="MB/s per application vs tile count (stacked)",
            )
            | charts.stacked_bars(
                data["shares"],
                x="tiles",
                x_title="tiles",
                field="iops",
                y_title="IOPS",
                title="IOPS per application vs tile count (stacked)",
            ),
        )
    )
    sections = [
        Section("scaling", "Scaling", scaling),
        Section(
            "steps", "Per tile count", [study_table(study), steps_table(study, study.study_dir)]
        ),
    ]
    dist = study_distribution(study)
    if dist is not None:
        sections.append(Section("distribution", "Latency distribution", [dist]))
    shown = best_step or (study.steps[-1] if study.steps else None)
    if shown is not None and shown.run is not None and shown.run.intervals_path().exists():
        series = compute_series(shown.run)
        for sec in time_series_sections(shown.run, series, prefix=f"t{shown.tiles}-"):
            sec.title = f"{sec.title} at {shown.tiles} tiles (run {shown.run.run_id})"
            sections.append(sec)
    links = [("study.json", study.study_dir / "study.json")]
    for st in study.steps:
        if st.run is not None:
            links += _links(st.run)
    details: dict[str, Any] = {"study": {k: v for k, v in doc.items() if k != "steps"}}
    if first_run is not None:
        details["environment (first step)"] = first_run.environment
        details["plan (first step)"] = first_run.plan
    return Report(
        kind="study",
        title=f"tilemark report: scaling study {study.study_id}",
        verdict=verdict,
        sections=sections,
        details=details,
        links=links,
        home=study.study_dir,
        source=study,
        generated_by=_generated(),
    )


def build_report(source: Source) -> Report:
    """The report of a run or a study."""
    if isinstance(source, StudyData):
        return study_report(source)
    return run_report(source)


# ---------------------------------------------------------------------------------------------
# comparisons


def _change_text(m: Any, i: int) -> tuple[str, str]:
    """'+12.3%' and a state: 'pass' when better than the baseline, 'fail' when worse."""
    c = m.change_pct[i]
    if c is None:
        return "-", ""
    if abs(c) < 0.05:
        return "+0.0%", ""
    better = (c > 0) == (m.better == "higher")
    return f"{c:+.1f}%", "pass" if better else "fail"


def compare_table(comparison: Any) -> Table:
    names = comparison.names
    b = comparison.baseline
    columns = ["metric", "unit", f"{names[b]} (baseline)"]
    others = [i for i in range(len(names)) if i != b]
    for i in others:
        columns += [names[i], "x baseline", "change"]
    rows = []
    for m in comparison.metrics:
        label = m.name if m.scope in ("total", m.name) else f"{m.name} ({m.scope})"
        row = [
            Cell(label),
            Cell(m.unit + (" (lower is better)" if m.better == "lower" else "")),
            Cell(num(m.values[b]), "num"),
        ]
        for i in others:
            text, state = _change_text(m, i)
            row += [
                Cell(num(m.values[i]), "num"),
                Cell("-" if m.normalized[i] is None else f"{m.normalized[i]:.2f}", "num"),
                Cell(text, state or "num"),
            ]
        rows.append(row)
    return Table(
        "comparison",
        f"Normalized to {names[b]} (baseline = 1.00)",
        columns,
        rows,
        caption="Latency is response time from merged histograms; green: better than the "
        "baseline, red: worse.",
    )


def compare_report(comparison: Any) -> Report:
    """Side-by-side report of runs or studies normalized to the baseline."""
    import altair as alt

    names = comparison.names
    b = comparison.baseline
    others = [i for i in range(len(names)) if i != b]
    facts = []
    key_metrics = (
        "score",
        "max passing tiles",
        "IOPS",
        "MB/s",
        "read latency p99",
        "write latency p99",
    )
    for m in comparison.metrics:
        if m.name in key_metrics and m.scope in ("total", m.name):
            for i in others:
                text, _state = _change_text(m, i)
                label = m.name if len(others) == 1 else f"{m.name}, {names[i]}"
                facts.append((label, text))
    what = "runs" if comparison.kind == "runs" else "scaling studies"
    verdict = Verdict(
        headline=f"{len(names)} {what} of {comparison.workload}, normalized to {names[b]}",
        status="info",
        facts=facts,
        tested=[(("baseline" if i == b else "compared"), names[i]) for i in range(len(names))]
        + [(f, " | ".join(v)) for f, v in comparison.differences],
        notes=[]
        if comparison.differences
        else ["the runs ran in the same environment (no setting differences recorded)"],
    )
    rows = []
    for m in comparison.metrics:
        for i, name in enumerate(names):
            rows.append(
                {
                    "metric": m.name if comparison.kind == "runs" else m.name,
                    "scope": m.scope,
                    "tiles": _tiles_of(m.scope),
                    "run": name,
                    "value": m.values[i],
                    "normalized": m.normalized[i],
                    "change_pct": m.change_pct[i],
                    "unit": m.unit,
                }
            )
    items: list[Figure | Table] = [compare_table(comparison)]
    if comparison.kind == "runs":
        total_rows = [r for r in rows if r["scope"] in ("total", r["metric"])]
        items.insert(
            0,
            Figure(
                "compare-normalized",
                "Normalized to the baseline",
                charts.normalized_bars(
                    total_rows, runs=names, title=f"Relative to {names[b]} (= 1.00)"
                ),
            ),
        )
    else:
        per_tile = [r for r in rows if r["tiles"] is not None]
        items.insert(
            0,
            Figure(
                "compare-normalized",
                "Normalized to the baseline per tile count",
                charts.normalized_bars(
                    per_tile,
                    runs=names,
                    x="tiles",
                    title=f"Relative to {names[b]} at the same tile count (= 1.00)",
                ),
            ),
        )
    sections = [Section("comparison", "Comparison", items)]
    if comparison.kind == "runs":
        series_rows = []
        dist_rows = []
        for run in comparison.sources:
            if run.intervals_path().exists():
                for r in compute_series(run).rows.get("total", []):
                    series_rows.append({**r, "group": run.run_id})
            all_streams = {run.run_id: list(range(len(run.stream_names)))}
            dist_rows += distribution_rows(run, all_streams)
        side = []
        if series_rows:
            for field, y_title in (("iops", "IOPS"), ("mbps", "MB/s (10^6 B/s)")):
                side.append(
                    Figure(
                        f"compare-{field}",
                        f"{y_title} over time",
                        charts.throughput_over_time(
                            series_rows,
                            field=field,
                            y_title=y_title,
                            title=f"Total {y_title.split(' ')[0]} over time per run",
                            warmup_s=comparison.sources[b].warmup_s(),
                            group_title="run",
                            order=names,
                        ),
                    )
                )
            side.append(
                Figure(
                    "compare-latency",
                    "Response time over time",
                    charts.latency_over_time(
                        series_rows,
                        stats=["p99", "p50"],
                        title="Response time p50 / p99 over time per run (all streams)",
                        warmup_s=comparison.sources[b].warmup_s(),
                        group_title="run",
                        order=names,
                    ),
                )
            )
        if dist_rows:
            side.append(
                Figure(
                    "compare-distribution",
                    "Latency distribution per run",
                    charts.percentile_plot(
                        dist_rows,
                        title="Response time percentiles per run (all streams merged)",
                        group_title="run",
                    ),
                )
            )
        sections.append(Section("side-by-side", "Side by side", side))
    else:
        totals = []
        for s in comparison.sources:
            for r in study_rows(s)["totals"]:
                totals.append({**r, "group": s.study_id})
        figs = []
        for field, y_title in (("score", "score"), ("iops", "IOPS"), ("mbps", "MB/s (10^6 B/s)")):
            data = charts.dataset(charts.compact(totals, ("tiles", "group", field, "verdict")))
            base = alt.Chart(data).encode(
                x=alt.X("tiles:Q", title="tiles", axis=alt.Axis(tickMinStep=1, format="d")),
                y=alt.Y(f"{field}:Q", title=y_title),
                color=alt.Color("group:N", title="study", sort=names),
            )
            figs.append(
                (
                    base.mark_line()
                    + base.mark_point(filled=True, size=50).encode(
                        shape=alt.Shape("verdict:N", title="QoS")
                    )
                ).properties(
                    title=f"{y_title} vs tiles",
                    width=charts.SMALL_WIDTH,
                    height=charts.SMALL_HEIGHT,
                )
            )
        sections.append(
            Section(
                "side-by-side",
                "Side by side",
                [
                    Figure(
                        "compare-scaling",
                        "Scaling side by side",
                        alt.concat(*figs, columns=3).properties(
                            title="Score, IOPS and MB/s vs tile count per study"
                        ),
                    )
                ],
            )
        )
    links: list[tuple[str, Path]] = []
    details: dict[str, Any] = {"comparison": comparison.to_json()}
    for src in comparison.sources:
        if isinstance(src, RunData):
            links += _links(src)
            details[f"environment {src.run_id}"] = src.environment
        else:
            links.append((f"{src.study_id}/study.json", src.study_dir / "study.json"))
    return Report(
        kind="compare",
        title=f"tilemark comparison: {', '.join(names)}",
        verdict=verdict,
        sections=sections,
        details=details,
        links=links,
        home=None,
        source=comparison,
        generated_by=_generated(),
    )


def _tiles_of(scope: str) -> int | None:
    if " @ " in scope and scope.endswith(" tiles"):
        return int(scope.rsplit(" @ ", 1)[1].split()[0])
    return None
