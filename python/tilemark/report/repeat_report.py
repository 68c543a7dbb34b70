"""The report of a repeat study: the verdict (stable / decaying / improving / inconclusive; two
repetitions compared before and after), the decay curve
(every headline metric per repetition as % of the first, with its trend line), the table of
repetitions and the trends of every metric, then the last repetition's time series."""

from __future__ import annotations

from typing import Any

from tilemark.analysis.changepoints import change_text
from tilemark.report import charts
from tilemark.report.base import Caution, Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import StudyData, compute_series
from tilemark.report.format import generated_by, num, tested_on
from tilemark.report.run_report import time_series_sections
from tilemark.report.study_report import study_details, study_links
from tilemark.store import results
from tilemark.wording import counted, signed_pct

VERDICT_STATUS = {
    "stable": "pass",
    "decaying": "fail",
    "improving": "info",
    "inconclusive": "warn",
    None: "warn",
}


def repeat_report(study: StudyData) -> Report:
    """The report of a repeat study (module doc)."""
    label = f" ({study.typed.label})" if study.typed.label else ""
    sections = [decay_section(study), trends_section(study)]
    sections += last_run_sections(study)
    return Report(
        kind="study",
        title=f"tilemark report: repeat study {study.study_id}{label}",
        verdict=repeat_verdict(study),
        sections=sections,
        details=study_details(study),
        links=study_links(study),
        home=study.study_dir,
        source=study,
        generated_by=generated_by(),
    )


def _metric(doc: results.StudyDoc, name: str) -> results.RepeatMetric | None:
    return next(
        (m for m in doc.metrics or [] if m.metric == name and m.scope == "total"),
        None,
    )


def _pct(value: float | None) -> str:
    return "-" if value is None else signed_pct(value)


def _ci(pair: list[float | None] | None) -> str:
    low, high = pair or (None, None)
    return "-" if low is None or high is None else f"{signed_pct(low)}..{signed_pct(high)}"


def repeat_verdict(study: StudyData) -> Verdict:
    """The verdict, how much the deciding metric moved, and the repetitions' setup."""
    doc = study.typed
    verdict = doc.verdict
    done = doc.repetitions_complete or []
    label = f"{doc.label}: " if doc.label else ""
    floor = doc.noise_floor_pct if doc.noise_floor_pct is not None else 5
    paired = len(done) == 2
    deciding = _metric(doc, doc.deciding_metric or "")
    if verdict is None and len(done) < 2:
        headline = (
            f"{label}no verdict: {counted(len(done), 'complete repetition')}; two compare "
            "before and after, three or more give a trend"
        )
    elif verdict is None:
        headline = f"{label}no verdict: the two repetitions hold no interval data to compare"
    elif paired:
        headline = f"{label}{verdict}, before vs after"
        if deciding and deciding.before_after:
            ba = deciding.before_after
            headline += f" ({deciding.metric} {_pct(ba.change_pct)}, 95% CI {_ci(ba.ci_pct)})"
    else:
        headline = f"{label}{verdict} over {len(done)} repetitions"
        if deciding and deciding.trend:
            change = deciding.trend.last_vs_first_pct
            headline += f" ({deciding.metric} {_pct(change)} from first to last)"
    iops = _metric(doc, "IOPS") or results.RepeatMetric()
    trend = iops.trend or results.Trend()
    if paired and iops.before_after:
        ba = iops.before_after
        facts = [
            ("verdict", verdict or "none"),
            ("repetitions", f"{len(done)} of {doc.repetitions}"),
            ("IOPS after vs before", _pct(ba.change_pct)),
            ("95% CI", _ci(ba.ci_pct)),
            ("beyond noise", "yes" if ba.beyond_noise else "no"),
        ]
        notes = [
            "before vs after: each headline metric's change with a 95% interval from the spread "
            "within each run (batch means); decaying or improving when it moved more than "
            f"{floor:g}% and the interval lies wholly on that side of zero, stable when the "
            f"interval lies within +-{floor:g}%, inconclusive otherwise"
        ]
    else:
        facts = [
            ("verdict", verdict or "none"),
            ("repetitions", f"{len(done)} of {doc.repetitions}"),
            ("IOPS last vs first", _pct(trend.last_vs_first_pct)),
            ("IOPS trend / rep", _pct(trend.slope_pct)),
            ("95% CI", _ci(trend.slope_ci_pct)),
        ]
        notes = [
            "decaying: the 95% interval of a headline metric's least-squares slope lies wholly "
            f"on the worse side of zero and its last repetition is more than {floor:g}% worse "
            "than its first; improving likewise; inconclusive when the interval allows more "
            f"than {floor:g}% per repetition either way; headline metrics: total IOPS, MB/s, "
            "mean read and write latency"
        ]
    bound = doc.tool_bound_repetitions or []
    if bound:
        notes.append(
            Caution(
                f"tool-bound: {'repetition' if len(bound) == 1 else 'repetitions'} "
                f"{', '.join(map(str, bound))} measured the host (CPU above 85% or the engine "
                "behind its schedule): those numbers describe the host, not the storage"
            )
        )
    if doc.stopped:
        notes.append(Caution(f"stopped: {doc.stopped}"))
    elif doc.complete is False:
        notes.append(Caution("the study was interrupted: the repetitions that ran are shown"))
    for st in study.steps:
        for c in st.typed.change_points or []:
            notes.append(f"repetition {st.key:g}: {change_text(c)}")
    setup = f"{doc.repetitions} repetitions of {doc.workload or doc.mode}"
    if doc.pause_s:
        setup += f", {num(doc.pause_s)} s apart"
    if doc.between:
        setup += f", running `{doc.between}` between them"
    tested = [("study", setup)]
    first = study.first_run()
    if first is not None:
        tested += tested_on(first)
    return Verdict(
        headline=headline,
        status=VERDICT_STATUS.get(verdict, "warn"),
        facts=facts,
        tested=tested,
        notes=notes,
    )


def decay_rows(doc: results.StudyDoc) -> list[dict[str, Any]]:
    """Per headline metric and repetition: value, % of the first, trend line in %."""
    reps = doc.repetitions_complete or []
    rows = []
    for m in doc.metrics or []:
        if not m.headline:
            continue
        values, changes = m.values or [], m.change_pct or []
        first = next((v for v in values if v is not None), None)
        slope_pct = m.trend.slope_pct if m.trend else None
        for n, value, change in zip(reps, values, changes, strict=True):
            if value is None or change is None:
                continue
            row = {"metric": m.metric, "repetition": n, "value": value, "pct": 100 + change}
            if slope_pct is not None and first:
                # The fitted line, as % of the first repetition's measured value.
                mean_x = sum(reps) / len(reps)
                mean_pct = sum(100 + c for c in changes if c is not None) / len(reps)
                row["trend_pct"] = mean_pct + slope_pct * (n - mean_x)
            rows.append(row)
    return rows


def decay_section(study: StudyData) -> Section:
    """The decay curve and the table of repetitions."""
    doc = study.typed
    items: list[Figure | Table] = []
    rows = decay_rows(doc)
    if rows:
        items.append(
            Figure(
                "decay-curve",
                "Decay curve",
                charts.decay_curve(rows, title="Headline metrics per repetition (% of the first)"),
                caption="Dashed: each metric's least-squares trend. For latency, above 100% "
                "is worse; for throughput, below.",
            )
        )
    metric_names = [m for m in doc.metrics or [] if m.scope == "total"]
    columns = ["repetition", "run", *[f"{m.metric} ({m.unit})" for m in metric_names]]
    table_rows = []
    reps = doc.repetitions_complete or []
    for st in study.steps:
        n = int(st.key)
        cells = [Cell(str(n), "num"), Cell(st.typed.run_id or "-")]
        for m in metric_names:
            if n in reps:
                i = reps.index(n)
                value, change = (m.values or [])[i], (m.change_pct or [])[i]
                text = num(value) + ("" if change is None or i == 0 else f" ({_pct(change)})")
            else:
                text = st.typed.status or "incomplete"
            cells.append(Cell(text, "num"))
        table_rows.append(cells)
    items.append(
        Table(
            "repetitions",
            "Repetitions (change from the first in parentheses)",
            columns,
            table_rows,
        )
    )
    return Section("decay", "Repetitions and decay", items)


def trends_section(study: StudyData) -> Section:
    """Every metric's trend and verdict (headline metrics decide the study's verdict)."""
    rows = []
    for m in study.typed.metrics or []:
        t = m.trend or results.Trend()
        ba = m.before_after
        state = {"decaying": "fail", "improving": "pass", "inconclusive": "warn"}.get(
            m.verdict or "", ""
        )
        rows.append(
            [
                Cell(str(m.metric) + (" *" if m.headline else "")),
                Cell(str(m.scope)),
                Cell(str(m.unit)),
                Cell(_pct(ba.change_pct if ba else t.last_vs_first_pct), "num"),
                Cell(_pct(t.slope_pct) if not ba else "-", "num"),
                Cell(_ci(ba.ci_pct if ba else t.slope_ci_pct), "num"),
                Cell(m.verdict or "-", state),
            ]
        )
    table = Table(
        "trends",
        "Trend of every metric (* headline: decides the verdict)",
        ["metric", "scope", "unit", "last vs first", "trend / rep", "95% CI", "verdict"],
        rows,
        caption="Trend: least-squares slope per repetition as % of the first repetition, with "
        "its 95% Student t interval. With two repetitions the 95% interval is that of the "
        "change from before to after.",
    )
    return Section("trends", "Trends", [table])


def last_run_sections(study: StudyData) -> list[Section]:
    """Time series of the last repetition's run (with its change points)."""
    shown = next((s for s in reversed(study.steps) if s.run is not None), None)
    if shown is None or not shown.run.intervals_path().exists():
        return []
    sections = time_series_sections(shown.run, compute_series(shown.run), prefix="last-")
    for sec in sections:
        sec.title = f"{sec.title}: repetition {shown.key:g} (run {shown.run.run_id})"
    return sections
