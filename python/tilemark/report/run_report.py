"""The report of one run (a plain run or a tile run): verdict first, then charts and tables.

Longer than 600 lines because the run report is one function per section, in the order the
page reads; a section's facts sit next to its chart.
"""

from __future__ import annotations

from typing import Any

from tilemark.analysis.changepoints import change_text
from tilemark.report import charts
from tilemark.report.array_report import array_section
from tilemark.report.base import Caution, Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import (
    RunData,
    SeriesSet,
    compute_series,
    distribution_rows,
    latency_stats_ms,
    merged_run_hist,
    run_groups,
)
from tilemark.report.format import (
    criterion_limit,
    criterion_value,
    describe_stream,
    generated_by,
    mark,
    ms,
    num,
    run_links,
    tested_on,
    workload_title,
)
from tilemark.report.replay_report import replay_section
from tilemark.report.steady_report import steady_section, window_hist
from tilemark.report.targets_report import targets_section
from tilemark.report.telemetry import telemetry_section, tool_bound_notes
from tilemark.run import datareduction
from tilemark.run.summary import errors_by_name, errors_text
from tilemark.store import results
from tilemark.targets import verification
from tilemark.wording import counted

# Groups drawn individually in a latency distribution plot; more are merged into one line.
MAX_DISTRIBUTION_GROUPS = 12
# Plan streams described one by one in the verdict; the rest are in Details.
MAX_DESCRIBED_STREAMS = 8


def run_report(run: RunData) -> Report:
    """The report of one run (a plain run or a tile run)."""
    headline, status, facts, notes = run_headline(run)
    verdict = Verdict(
        headline=headline,
        status=status,
        facts=facts,
        tested=run_tested(run),
        notes=notes,
        criteria=criteria_table(run),
    )
    sections: list[Section] = []
    summary = run.typed.summary or results.Summary()
    if summary.steady_state:
        sections.append(steady_section(summary.steady_state))
    if run.is_tile_run:
        sections.append(Section("applications", "Applications", applications_tables(run)))
    if summary.files:
        from tilemark.report.files_report import files_section

        section = files_section(run)
        if section is not None:
            sections.append(section)
    if summary.replay:
        sections.append(replay_section(summary.replay))
    if run.intervals_path().exists() or (run.run_dir / "intervals.parts").is_dir():
        series = compute_series(run)
        series.phases = phase_marks(run)
        sections.extend(time_series_sections(run, series))
    warmup_s = float((run.typed.plan.warmup_ms if run.typed.plan else None) or 0) / 1e3
    per_target = targets_section(run, warmup_s)
    if per_target is not None:
        sections.append(per_target)
    devices = telemetry_section(run)
    if devices is not None:
        sections.append(devices)
    array = array_section(run)
    if array is not None:
        sections.append(array)
    sections.append(
        Section(
            "distribution",
            "Latency distribution",
            [distribution_figure(run), streams_table(run)],
        )
    )
    return Report(
        kind="tiles" if run.is_tile_run else "run",
        title=f"tilemark report: run {run.run_id}"
        + (f" ({run.typed.label})" if run.typed.label else ""),
        verdict=verdict,
        sections=sections,
        details=run_details(run),
        links=run_links(run),
        home=run.run_dir,
        source=run,
        generated_by=generated_by(),
    )


# ---------------------------------------------------------------------------------------------
# verdict


def run_headline(run: RunData) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """Headline sentence, status, big numbers and notes of a run."""
    doc = run.typed
    summary = doc.summary or results.Summary()
    total = summary.total or results.Total()
    notes = []
    status = "info"
    if doc.status != "complete":
        status = "fail" if doc.status in ("failed", "errors", "hung", "data-errors") else "warn"
        notes.append(
            Caution(
                f"run status: {doc.status}"
                + (f": {doc.error}" if doc.error else "")
                + " (measurements cover what completed)"
            )
        )
    if total.errors:
        status = "warn" if status == "info" else status
        named = errors_text(total.errors_by_name or {})
        named = f" ({named})" if total.errors_by_name else ""
        notes.append(
            Caution(
                f"{int(total.errors):,} IOs failed{named}; they are not in IOPS, MB/s or latency"
            )
        )
    bound = tool_bound_notes(run.summary or {})
    if bound:
        status = "warn" if status == "info" else status
        notes.extend(Caution(b) for b in bound)
    for change in summary.change_points or []:
        notes.append(f"change point: {change_text(change)} (dashed rules on the time charts)")
    notes.extend(data_notes(run))
    steady = summary.steady_state  # as summarized (steady_report reads it)
    if steady:
        verdict = str(steady.verdict)
        notes.append(verdict if steady.steady else Caution(verdict))
        if not steady.steady and status == "info":
            status = "warn"
    read = (steady and window_hist(steady, "read")) or merged_run_hist(run, None, "read")
    write = (steady and window_hist(steady, "write")) or merged_run_hist(run, None, "write")
    read_p99 = ms(latency_stats_ms(read)["p99"]) if read.n else None
    write_p99 = ms(latency_stats_ms(write)["p99"]) if write.n else None
    facts = [
        ("IOPS", num(total.iops)),
        ("MB/s", num(total.mbps)),
        ("read p99", read_p99 or "-"),
        ("write p99", write_p99 or "-"),
        ("measured", f"{num(summary.duration_s)} s"),
        ("errors", num(total.errors if total.errors is not None else 0)),
    ]
    apps = summary.applications
    name = workload_title(run)
    if apps is not None:
        verdict = "PASS" if apps.passed else "FAIL"
        # A pass stays a pass when a note warns (tool-bound): amber, not red.
        if not apps.passed:
            status = "fail"
        elif status == "info":
            status = "pass"
        score = f", score {apps.score:.2f}" if apps.score is not None else ""
        failed = len(apps.failed or [])
        tile = apps.layout.tile if apps.layout and apps.layout.tile is not None else name
        headline = (
            f"{counted(apps.tiles, 'tile')} of {tile}: "  # type: ignore[arg-type]
            f"QoS {verdict}{score}"
            + (f" ({failed} criteria failed)" if failed else " (every application passes)")
        )
        facts = [
            ("tiles", str(apps.tiles)),
            ("QoS", verdict),
            ("score", num(apps.score)),
            *facts,
        ]
    else:
        headline = (
            f"{name}: {num(total.iops)} IOPS, {num(total.mbps)} MB/s"
            + (f", read p99 {read_p99}" if read_p99 else "")
            + (f", write p99 {write_p99}" if write_p99 else "")
            + f" over {num(summary.duration_s)} s"
        )
        if steady and steady.window_streams:
            w: Any = steady.window  # a summary over the window has its window
            headline += f" (the steady window, rounds {w.first_round}-{w.last_round})"
    if doc.label:
        headline = f"{doc.label}: {headline}"
    return headline, status, facts, notes


def data_notes(run: RunData) -> list[str]:
    """What the run wrote (its measured compressibility and dedupability), what its reads
    found, and the verification passes over it (docs/verification.md)."""
    summary = run.typed.summary or results.Summary()
    notes = []
    reduction = (summary.data_reduction or {}).get("overall")  # datareduction's own document
    if reduction:
        notes.append(
            f"data written: {datareduction.describe(reduction)} (measured at the start on data "
            "generated as the streams write it)"
        )
    if summary.verification is not None:
        checked = (run.summary or {})["verification"]  # as written: verification.line reads it
        notes.append(verification.line(checked))
        notes.extend(
            Caution(f"finding: {verification.finding_text(f)}")
            for f in (summary.verification.listed or [])[:5]
        )
    for p in run.typed.verify_passes or []:
        notes.append(
            f"verification pass {p.started_at}: {num(p.bytes / 1e6)} MB in "  # type: ignore[operator]
            f"{p.seconds:.1f} s ({num(p.mbps)} MB/s), {p.total:,} findings"
            + (f" ({verification.count_text(p.by_class)})" if p.total else "")
        )
    return notes


def run_tested(run: RunData) -> list[tuple[str, str]]:
    """What ran (workload, its streams) and where (tested_on)."""
    streams = (run.typed.plan.streams if run.typed.plan else None) or []
    more = len(streams) - MAX_DESCRIBED_STREAMS
    workload = run.typed.workload
    return [
        ("workload", (workload.name if workload else None) or "-"),
        *[("stream", describe_stream(s)) for s in streams[:MAX_DESCRIBED_STREAMS]],
        *([("streams", f"... and {more} more (see Details)")] if more > 0 else []),
        *tested_on(run),
    ]


def criteria_table(run: RunData) -> Table | None:
    """Pass/fail of every QoS criterion of every application instance."""
    apps = run.typed.summary.applications if run.typed.summary else None
    if apps is None:
        return None
    rows = []
    for inst in apps.instances or []:
        by_criterion: dict[str | None, list[results.QosVerdict]] = {}
        for v in inst.verdicts or []:
            by_criterion.setdefault(v.criterion, []).append(v)
        for verdicts in by_criterion.values():
            window = next((v for v in verdicts if v.scope == "window"), verdicts[0])
            intervals = [v for v in verdicts if v.scope != "window"]
            failed_intervals = [v for v in intervals if not v.passed]
            passed = all(v.passed for v in verdicts)
            rows.append(
                [
                    Cell(str(inst.tile), "num"),
                    Cell(str(inst.app)),
                    Cell(str(window.description)),
                    Cell(criterion_value(window), "num"),
                    Cell(criterion_limit(window), "num"),
                    Cell(
                        f"{len(failed_intervals)} of {len(intervals)} failed" if intervals else "-",
                        "fail" if failed_intervals else "",
                    ),
                    mark(passed),
                ]
            )
    return Table(
        "qos",
        "QoS criteria per application instance",
        ["tile", "application", "criterion", "measured (window)", "limit", "QoS intervals", "QoS"],
        rows,
        caption=(
            f"Latency criteria use response time (from the intended issue time). Per-interval "
            f"criteria are also checked in each {num(apps.qos_interval_s)} s QoS interval."
        ),
    )


def run_details(run: RunData) -> dict[str, Any]:
    """The collapsible raw documents of a run."""
    return {
        "environment": run.environment,
        "workload": run.doc.get("workload"),
        "plan": run.plan,
        "targets": run.doc.get("targets"),
        "devices underneath": run.doc.get("telemetry"),
        "command line": run.doc.get("argv"),
    }


# ---------------------------------------------------------------------------------------------
# tables


def _latencies(by_criterion: dict[str, float | None]) -> str:
    return ", ".join(f"{cid} {num(v)} ms" for cid, v in by_criterion.items()) or "-"


def applications_tables(run: RunData) -> list[Table]:
    """The seeds' tables: per application (summed over tiles) and per instance."""
    apps = run.typed.summary.applications if run.typed.summary else None
    if apps is None:
        return []
    per_app = []
    for a in apps.applications or []:
        targets = [
            i.target_metric
            for i in apps.instances or []
            if i.app == a.app and i.target_metric is not None
        ]
        per_app.append(
            [
                Cell(str(a.app)),
                Cell(str(a.instances), "num"),
                Cell(f"{num(a.metric_total)} {a.metric_unit}", "num"),
                Cell(num(sum(targets)) if targets else "-", "num"),
                Cell(_latencies(a.worst_latency_ms or {})),
                Cell(num(a.iops), "num"),
                Cell(num(a.mbps), "num"),
                mark(bool(a.passed)),
            ]
        )
    instances = []
    for i in apps.instances or []:
        instances.append(
            [
                Cell(str(i.tile), "num"),
                Cell(str(i.app)),
                Cell(f"{num(i.metric)} {i.metric_unit}", "num"),
                Cell(num(i.target_metric), "num"),
                Cell(_latencies(i.latency_ms or {})),
                Cell(num(i.iops), "num"),
                Cell(num(i.mbps), "num"),
                Cell(num(i.errors), "fail" if i.errors else "num"),
                mark(bool(i.passed)),
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


def _stream_latency(op: results.OpSummary | None) -> str:
    """'mean / p50 / p99 / p99.9' (ms) of one op of a summary stream, or '-'."""
    r = op.response if op else None
    if r is None or r.mean_ms is None:
        return "-"
    return " / ".join(num(v) for v in (r.mean_ms, r.p50_ms, r.p99_ms, r.p999_ms))


def _stream_errors(s: results.StreamSummary) -> Cell:
    """A stream's IO errors by errno name (EIO 12, ENOSPC 3), red when there are any."""
    ops = (s.read, s.write, s.sync)
    named = errors_by_name(*({"errors": o.errors or {}} if o else None for o in ops))
    return Cell(errors_text(named), "fail" if named else "num")


def streams_table(run: RunData) -> Table:
    """Per stream: rates and read/write latency (mean, p50, p99, p99.9) of the run."""
    summary = run.typed.summary or results.Summary()
    apps = run.app_of_stream()
    rows = []
    for s in summary.streams or []:
        total = s.total or results.Rates()
        rows.append(
            [
                Cell(str(s.name)),
                *([Cell(apps.get(s.stream, "-"))] if apps else []),  # type: ignore[arg-type]
                Cell("closed" if s.arrival == "closed" else f"open {num(s.target_iops)}/s"),
                Cell(num(total.iops), "num"),
                Cell(num(total.mbps), "num"),
                Cell(_stream_latency(s.read), "num"),
                Cell(_stream_latency(s.write), "num"),
                Cell(num(s.lag_max_ms), "num"),
                Cell(num(s.ios_issued_late), "num"),
                _stream_errors(s),
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


# ---------------------------------------------------------------------------------------------
# time series and distribution


def _has_svc(series: SeriesSet, level: str) -> bool:
    """Whether `level` has open-loop groups, whose service time differs from response time."""
    return bool(series.open_loop.get(level, set()))


def _series_note(series: SeriesSet) -> str:
    per = series.intervals_per_point
    return (
        f"{series.intervals} intervals; each point merges {per.get('total', 1)} interval(s)"
        + (
            f" ({per['stream']} per point for single streams)"
            if per.get("stream", 1) != per.get("total", 1)
            else ""
        )
        + ": rates are sums over the merged intervals, percentiles come from merged "
        "histograms. Grey band: warm-up (not in the summary)."
    )


def _applications_over_time(series: SeriesSet, prefix: str, note: str) -> Section:
    """Stacked MB/s and IOPS per application, response (and service) time per application."""
    rows = series.rows.get("app", [])
    warm = series.warmup_s
    items: list[Figure | Table] = [
        Figure(
            f"{prefix}apps-{field}",
            title,
            charts.throughput_over_time(
                rows,
                field=field,
                title=title,
                warmup_s=warm,
                changes=series.changes,
                phases=series.phases,
                group_title="application",
                stacked=True,
            ),
        )
        for field, title in (
            ("mbps", "MB/s per application (stacked)"),
            ("iops", "IOPS per application (stacked)"),
        )
    ]

    def latency(fig: str, what: str, stats: list[str], scope: str) -> Figure:
        return Figure(
            f"{prefix}apps-{fig}",
            f"{what} per application",
            charts.latency_over_time(
                rows,
                stats=stats,
                title=f"{what} p50 / p99 per application ({scope})",
                warmup_s=warm,
                changes=series.changes,
                phases=series.phases,
                group_title="application",
            ),
        )

    items.append(latency("latency", "Response time", ["p99", "p50"], "reads and writes"))
    if _has_svc(series, "app"):
        items.append(
            latency("service", "Service time", ["svc_p99", "svc_p50"], "submission to completion")
        )
    return Section(f"{prefix}apps-time", "Applications over time", items, note)


def _totals_over_time(run: RunData, series: SeriesSet, prefix: str) -> list[Figure | Table]:
    """Total throughput and latency of all streams (only worth a chart for several streams)."""
    if len(run.stream_names) <= 1:
        return []
    rows = series.rows.get("total", [])
    warm = series.warmup_s
    iops, mbps = (
        charts.throughput_over_time(
            rows,
            field=field,
            title=f"Total {unit} (all streams)",
            warmup_s=warm,
            changes=series.changes,
            phases=series.phases,
            group_title="streams",
        )
        for field, unit in (("iops", "IOPS"), ("mbps", "MB/s"))
    )
    return [
        Figure(f"{prefix}total-throughput", "Total IOPS and MB/s", iops & mbps),
        Figure(
            f"{prefix}total-latency",
            "Latency of all streams",
            charts.latency_over_time(
                rows,
                stats=["p99", "p50"]
                + (["svc_p99", "svc_p50"] if _has_svc(series, "total") else []),
                title="Response time p50 / p99 of all streams (merged histograms)",
                warmup_s=warm,
                changes=series.changes,
                phases=series.phases,
                group_title="streams",
            ),
        ),
    ]


def phase_marks(run: RunData) -> list[dict[str, Any]]:
    """Where phased streams start and stop (run time), for the time charts' rules."""
    marks = []
    spans = (run.result or {}).get("spans") or []  # the engine result stays untyped (data.py)
    for i, s in enumerate((run.typed.plan.streams if run.typed.plan else None) or []):
        if s.after:  # started when others ended: the engine's times (spans)
            span = spans[i] if i < len(spans) else {}
            for key, what in (("started_ns", "starts"), ("ended_ns", "stops")):
                if span.get(key) is not None:
                    marks.append({"t_s": span[key] / 1e9, "label": f"{s.name} {what}"})
            continue
        if s.start_ms:
            marks.append({"t_s": s.start_ms / 1e3, "label": f"{s.name} starts"})
        if s.stop_ms is not None:
            marks.append({"t_s": s.stop_ms / 1e3, "label": f"{s.name} stops"})
    return marks


def _streams_over_time(run: RunData, series: SeriesSet, prefix: str) -> list[Figure | Table]:
    """IOPS, MB/s and latency per stream; a picker instead of lines when there are many."""
    rows = series.rows.get("stream", [])
    warm = series.warmup_s
    stats = ["p99", "p50"] + (["svc_p99", "svc_p50"] if _has_svc(series, "stream") else [])
    groups = len({r["group"] for r in rows})
    many = groups > 1 and groups * len(stats) > charts.MAX_LATENCY_LINES
    items: list[Figure | Table] = [
        Figure(
            f"{prefix}streams-{field}",
            title,
            charts.throughput_over_time(
                rows,
                field=field,
                title=title,
                warmup_s=warm,
                changes=series.changes,
                phases=series.phases,
                order=run.stream_names,
            ),
        )
        for field, title in (("iops", "IOPS per stream"), ("mbps", "MB/s per stream"))
    ]
    items.append(
        Figure(
            f"{prefix}streams-latency",
            "Latency per stream",
            charts.latency_over_time(
                rows,
                stats=stats,
                title="Response time p50 / p99 per stream"
                + (" (service time where it differs: open loop)" if len(stats) > 2 else ""),
                warmup_s=warm,
                changes=series.changes,
                phases=series.phases,
                order=run.stream_names,
            ),
            caption="Pick a stream in the list under the chart." if many else "",
        )
    )
    return items


def time_series_sections(run: RunData, series: SeriesSet, prefix: str = "") -> list[Section]:
    """Throughput and latency over time, per application (tile runs) and per stream."""
    note = _series_note(series)
    if run.is_tile_run:
        return [
            _applications_over_time(series, prefix, note),
            Section(
                f"{prefix}streams-time",
                "Streams over time",
                _streams_over_time(run, series, prefix),
            ),
        ]
    items = _totals_over_time(run, series, prefix) + _streams_over_time(run, series, prefix)
    return [Section(f"{prefix}time", "Over time", items, note)]


def distribution_figure(run: RunData, fig_id: str = "latency-distribution") -> Figure:
    """Response-time percentiles per application (tile runs) or stream, merged histograms."""
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
