"""The report of a comparison: runs or studies of one workload, normalized to a baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tilemark.analysis.compare import Comparison, Metric
from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import STUDY_FILE, RunData, compute_series, distribution_rows
from tilemark.report.format import generated_by, num, run_links
from tilemark.report.study_report import study_rows
from tilemark.wording import signed_pct

# Metrics whose change from the baseline is a big number of the verdict.
KEY_METRICS = (
    "score",
    "max passing tiles",
    "IOPS",
    "MB/s",
    "read latency p99",
    "write latency p99",
)


def compare_report(comparison: Comparison) -> Report:
    """Side-by-side report of runs or studies normalized to the baseline."""
    names = comparison.shown
    verdict = compare_verdict(comparison)
    items: list[Figure | Table] = [normalized_figure(comparison), compare_table(comparison)]
    sections = [Section("comparison", "Comparison", items)]
    if comparison.kind == "runs":
        sections.append(runs_side_by_side(comparison))
    elif comparison.kind == "studies":
        sections.append(studies_side_by_side(comparison))
    links: list[tuple[str, Path]] = []
    details: dict[str, Any] = {"comparison": comparison.to_json()}
    for src in comparison.sources:
        if isinstance(src, RunData):
            links += run_links(src)
            details[f"environment {src.run_id}"] = src.environment
        else:
            links.append((f"{src.study_id}/{STUDY_FILE}", src.study_dir / STUDY_FILE))
    return Report(
        kind="compare",
        title=f"tilemark comparison: {', '.join(names)}",
        verdict=verdict,
        sections=sections,
        details=details,
        links=links,
        home=None,
        source=comparison,
        generated_by=generated_by(),
    )


def _others(comparison: Comparison) -> list[int]:
    """Indexes of the compared sources other than the baseline."""
    return [i for i in range(len(comparison.names)) if i != comparison.baseline]


def _is_headline_scope(m: Metric) -> bool:
    """Whether a metric is the whole run's or study's (not one tile count's or stream's)."""
    return m.scope in ("total", m.name)


def _change_text(m: Metric, i: int) -> tuple[str, str]:
    """'+12.3%' and a state: 'pass' when better than the baseline, 'fail' when worse."""
    c = m.change_pct[i]
    if c is None:
        return "-", ""
    if abs(c) < 0.05:
        return "+0.0%", ""
    better = (c > 0) == (m.better == "higher")
    return signed_pct(c), "pass" if better else "fail"


def compare_verdict(comparison: Comparison) -> Verdict:
    """What was compared with what, the key changes, and the setting differences."""
    names = comparison.shown
    b = comparison.baseline
    others = _others(comparison)
    facts = []
    for m in comparison.metrics:
        if m.name in KEY_METRICS and _is_headline_scope(m):
            for i in others:
                text, _state = _change_text(m, i)
                label = m.name if len(others) == 1 else f"{m.name}, {names[i]}"
                facts.append((label, text))
    what = {"runs": "runs", "studies": "scaling studies"}.get(comparison.kind, "studies")
    to = f" at point {comparison.normalized_to}" if comparison.normalized_to else ""
    return Verdict(
        headline=f"{len(names)} {what} of {comparison.workload}, normalized to {names[b]}{to}",
        status="info",
        facts=facts,
        tested=[(("baseline" if i == b else "compared"), names[i]) for i in range(len(names))]
        + [(f, " | ".join(v)) for f, v in comparison.differences],
        notes=[]
        if comparison.differences
        else ["the runs ran in the same environment (no setting differences recorded)"],
    )


def compare_table(comparison: Comparison) -> Table:
    """Every metric: the baseline's value, then each other's value, ratio and change."""
    names = comparison.shown
    b = comparison.baseline
    to = comparison.normalized_to
    ratio = f"÷ baseline at {to}" if to else "x baseline"
    columns = ["metric", "unit", f"{names[b]} (baseline)"] + ([ratio] if to else [])
    others = _others(comparison)
    for i in others:
        columns += [names[i], ratio, "change"]

    def normalized(m: Metric, i: int) -> Cell:
        return Cell("-" if m.normalized[i] is None else f"{m.normalized[i]:.2f}", "num")

    rows = []
    for m in comparison.metrics:
        label = m.name if _is_headline_scope(m) else f"{m.name} ({m.scope})"
        row = [
            Cell(label),
            Cell(m.unit + (" (lower is better)" if m.better == "lower" else "")),
            Cell(num(m.values[b]), "num"),
        ]
        if to:  # the baseline's own value divided by its value at the reference point
            row.append(normalized(m, b))
        for i in others:
            text, state = _change_text(m, i)
            row += [Cell(num(m.values[i]), "num"), normalized(m, i), Cell(text, state or "num")]
        rows.append(row)
    title = (
        f"Every value divided by {names[b]}'s value at {to} (= 1.00)"
        if to
        else f"Normalized to {names[b]} (baseline = 1.00)"
    )
    return Table(
        "comparison",
        title,
        columns,
        rows,
        caption="Latency is response time from merged histograms; change: from the baseline's "
        "same point; green: better than the baseline, red: worse.",
    )


def _tiles_of(scope: str) -> int | None:
    """The tile count of a per-count scope ('total @ 3 tiles'), else None."""
    if " @ " in scope and scope.endswith(" tiles"):
        return int(scope.rsplit(" @ ", 1)[1].split()[0])
    return None


def metric_rows(comparison: Comparison) -> list[dict[str, Any]]:
    """One plain row per metric and source, for charts."""
    return [
        {
            "metric": m.name,
            "scope": m.scope,
            "tiles": _tiles_of(m.scope),
            "run": name,
            "value": m.values[i],
            "normalized": m.normalized[i],
            "change_pct": m.change_pct[i],
            "unit": m.unit,
        }
        for m in comparison.metrics
        for i, name in enumerate(comparison.legend_names)
    ]


def normalized_figure(comparison: Comparison) -> Figure:
    """Each metric relative to the baseline: whole runs, or per tile count for studies."""
    names = comparison.legend_names
    baseline = names[comparison.baseline]
    rows = metric_rows(comparison)
    if comparison.kind == "runs":
        total_rows = [r for r in rows if r["scope"] in ("total", r["metric"])]
        return Figure(
            "compare-normalized",
            "Normalized to the baseline",
            charts.normalized_bars(
                total_rows, runs=names, title=f"Relative to {baseline} (= 1.00)"
            ),
        )
    if comparison.kind == "points":
        per_point = [{**r, "point": r["scope"]} for r in rows if r["scope"] != "total"]
        to = comparison.normalized_to
        return Figure(
            "compare-normalized",
            "Normalized to the baseline per point",
            charts.normalized_bars(
                per_point,
                runs=names,
                x="point",
                x_title="point",
                title=f"Relative to {baseline} at point {to} (= 1.00)"
                if to
                else f"Relative to {baseline} at the same point (= 1.00)",
            ),
        )
    per_tile = [r for r in rows if r["tiles"] is not None]
    return Figure(
        "compare-normalized",
        "Normalized to the baseline per tile count",
        charts.normalized_bars(
            per_tile,
            runs=names,
            x="tiles",
            title=f"Relative to {baseline} at the same tile count (= 1.00)",
        ),
    )


def runs_side_by_side(comparison: Comparison) -> Section:
    """Total throughput and latency over time, and latency percentiles, one line per run."""
    names = comparison.legend_names
    warm = comparison.sources[comparison.baseline].warmup_s()
    series_rows = []
    dist_rows = []
    shown = dict(zip(comparison.names, comparison.legend_names, strict=True))
    for run in comparison.sources:
        if run.intervals_path().exists():
            for r in compute_series(run).rows.get("total", []):
                series_rows.append({**r, "group": shown[run.run_id]})
        all_streams = {shown[run.run_id]: list(range(len(run.stream_names)))}
        dist_rows += distribution_rows(run, all_streams)
    side: list[Figure | Table] = []
    if series_rows:
        for field in ("iops", "mbps"):
            y_title = charts.Y_TITLES[field]
            side.append(
                Figure(
                    f"compare-{field}",
                    f"{y_title} over time",
                    charts.throughput_over_time(
                        series_rows,
                        field=field,
                        title=f"Total {y_title.split(' ')[0]} over time per run",
                        warmup_s=warm,
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
                    warmup_s=warm,
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
    return Section("side-by-side", "Side by side", side)


def studies_side_by_side(comparison: Comparison) -> Section:
    """Score, IOPS and MB/s vs tile count, one line per study."""
    shown = dict(zip(comparison.names, comparison.legend_names, strict=True))
    totals = [
        {**r, "group": shown[s.study_id]}
        for s in comparison.sources
        for r in study_rows(s)["totals"]
    ]
    figure = Figure(
        "compare-scaling",
        "Scaling side by side",
        charts.scaling_side_by_side(
            totals,
            studies=comparison.legend_names,
            title="Score, IOPS and MB/s vs tile count per study",
        ),
    )
    return Section("side-by-side", "Side by side", [figure])
