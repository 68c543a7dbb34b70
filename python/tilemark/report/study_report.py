"""The report of a scaling study: capacity first, then scaling charts and per-tile-count tables.

study_report() only assembles; each part of the page is one function of the StudyData, so a
new section (or a new fact in the verdict) is one more function and one more line there.

Longer than 600 lines because the study report is one function per section, in the order
the page reads (see above).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tilemark.analysis.tiles import margin_text
from tilemark.report import charts
from tilemark.report.base import Caution, Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import (
    STUDY_FILE,
    StudyData,
    StudyStep,
    compute_series,
    distribution_rows,
    relpath,
    run_groups,
)
from tilemark.report.format import generated_by, mark, num, run_links, steady_cell, tested_on
from tilemark.report.run_report import time_series_sections
from tilemark.store import results
from tilemark.study.answers import answer_phrase, caveats
from tilemark.wording import counted, signed_pct


def study_report(study: StudyData) -> Report:
    """The report of a scaling study: capacity, scaling charts, per-tile-count tables."""
    verdict = study_verdict(study)
    sections = [scaling_section(study), margins_section(study), steps_section(study)]
    repeats = repeats_section(study)
    if repeats is not None:
        sections.insert(1, repeats)
    distribution = distribution_section(study)
    if distribution is not None:
        sections.append(distribution)
    sections += shown_step_sections(study)
    return Report(
        kind="study",
        title=f"tilemark report: {'knob' if study.is_knob else 'scaling'} study {study.study_id}"
        + (f" ({study.typed.label})" if study.typed.label else ""),
        verdict=verdict,
        sections=sections,
        details=study_details(study),
        links=study_links(study),
        home=study.study_dir,
        source=study,
        generated_by=generated_by(),
    )


# ---------------------------------------------------------------------------------------------
# verdict


def _best_step(study: StudyData) -> StudyStep | None:
    """The step at the study's answer (largest passing count or value), if any."""
    return study.step_at(study.answer)


def _axis_value(study: StudyData, value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:g} {study.axis}" if not study.is_knob else f"{study.axis}={value:g}"


def study_headline(study: StudyData) -> tuple[str, str]:
    """Headline sentence and status (the verdict box's colour) of a study."""
    doc = study.typed
    best = study.answer
    what = f"Max {study.axis}" if study.is_knob else "Max passing tiles"
    if study.is_knob:
        what += f" at {counted(_or(doc.tiles_per_step, 1), 'tile')}"
    if best is None:
        headline = f"No {'value' if study.is_knob else 'tile count'} passes QoS"
        status = "fail"
    else:
        score = f", score {doc.score_at_max:.2f}" if doc.score_at_max is not None else ""
        headline = f"{what}: {answer_phrase(study.typed)}{score}"
        # An answer that is a range or measured the host is shown, but not as a clean pass.
        caveat = doc.host_bound or doc.inconclusive_at is not None
        status = "warn" if caveat else "pass"
    runs = doc.max_passing_value_runs if study.is_knob else doc.max_passing_tiles_runs
    if runs and len(runs) > 1:
        listed = ", ".join("none" if v is None else f"{v:g}" for v in runs)
        agree = "all agree" if doc.stable else "median; they differ"
        headline += f" ({len(runs)} repeats: {listed}; {agree})"
        if not doc.stable:
            status = "warn"
    if doc.complete is False:
        status = "warn"
    return headline, status


def _or(value: Any, default: Any) -> Any:
    """`value` unless the document left it out (None): dict.get(key, default) of a typed
    field."""
    return default if value is None else value


def _first_failure_at(study: StudyData) -> float | None:
    """The tile count (or knob value) of the first failure, if any."""
    first = study.typed.first_failure
    if not first:
        return None
    return first.value if study.is_knob else first.tiles


def study_facts(study: StudyData) -> list[tuple[str, str]]:
    """The big numbers: capacity, throughput at capacity, first failure, runs used."""
    doc = study.typed
    best_step = _best_step(study)
    at_best = (best_step.typed.total if best_step else None) or results.Rates()
    facts = [
        (f"max {study.axis}" if study.is_knob else "max passing tiles", _answer_text(study)),
        ("score at max", num(doc.score_at_max)),
        ("IOPS at max", num(at_best.iops)),
        ("MB/s at max", num(at_best.mbps)),
        (
            "first failure",
            _axis_value(study, _first_failure_at(study)) if doc.first_failure else "none",
        ),
        ("runs", str(_or(doc.runs_used, len(study.steps)))),
    ]
    settle = doc.settle
    if settle:
        facts.append(("settled", f"{settle.seconds:.0f} s" + ("" if settle.steady else "?")))
    return facts


def _answer_text(study: StudyData) -> str:
    return answer_phrase(study.typed)


def study_notes(study: StudyData) -> list[str]:
    """What decided the answer, what did not add up, and whether the study was cut short."""
    doc = study.typed
    first = doc.first_failure
    notes = []
    if first:
        at = _axis_value(study, _first_failure_at(study))
        deciding = first.deciding  # criterion_json with app and tile: margin_text reads it
        how = "bounded (inconclusive)" if first.within_noise else "decided"
        if deciding:
            where = f", tile {deciding['tile']}" if deciding.get("tile") else ""
            notes.append(f"{how} at {at} by {deciding['app']}{where}: {margin_text(deciding)}")
        elif first.failed:
            noise = " (inconclusive)" if first.within_noise else ""
            notes.append(f"first failure ({at}){noise}: " + "; ".join(first.failed[:6]))
        votes = first.votes or {}
        if sum(votes.values()) > 1:
            notes.append(
                f"that failure was confirmed: {votes.get('fail', 0) + votes.get('noise', 0)} of "
                f"{sum(votes.values())} runs failed"
            )
    notes += [Caution(text) if warns else text for text, warns in caveats(study.typed)]
    for nm in doc.non_monotonic or []:
        notes.append(
            Caution(
                f"not monotonic: {nm.failed:g} failed but {nm.passed_above:g} passed "
                "after a re-check; the storage's answer is within its noise there"
            )
        )
    unsteady = [st for st in study.steps if st.typed.steady and not st.typed.steady.rule_met]
    if unsteady:
        max_rounds = doc.until_steady.max_rounds if doc.until_steady else None
        notes.append(
            Caution(
                f"not steady after {max_rounds} rounds at "
                + ", ".join(_axis_value(study, st.key) for st in unsteady)
                + ": those steps were judged over all they measured while the storage was "
                "changing"
            )
        )
    settle = doc.settle
    if settle and not settle.steady:
        notes.append(
            Caution(
                f"read latency was not steady after {settle.seconds:.0f} s of settling after "
                "the fill; the first step may still see the storage absorbing it"
            )
        )
    if doc.complete is False:
        notes.append(Caution("the study was interrupted: the steps so far are shown"))
    return notes


def study_tested(study: StudyData) -> list[tuple[str, str]]:
    """The tile (applications and their scale), the study settings, and where it ran."""
    tile = study.typed.tile or results.StudyTile()
    tested = [
        (
            "tile",
            f"{tile.name}: "
            + ", ".join(
                f"{a.app} ({', '.join(f'{k} {v:g}' for k, v in (a.scale or {}).items())})"
                for a in tile.applications or []
            ),
        ),
        ("study", _study_setup(study)),
    ]
    first_run = study.first_run()
    if first_run is not None:
        tested += tested_on(first_run)
    return tested


def _study_setup(study: StudyData) -> str:
    doc = study.typed
    if study.is_knob:
        lo, hi = doc.knob_range or (None, None)
        what = (
            f"{study.axis} searched from {num(doc.knob_start)} within {num(lo)}..{num(hi)} "
            f"to {num(doc.knob_precision_pct)}% at "
            f"{counted(doc.tiles_per_step or 1, 'tile')}"
        )
    else:
        what = f"{doc.mode} over {doc.tile_counts} tiles"
    timing = f"{num(doc.duration)} s measured"
    steady = doc.until_steady
    if steady:
        timing = (
            f"measured until steady ({steady.metric}, rounds of {num(steady.round_s)} s, "
            f"at most {steady.max_rounds}; judged over the steady window)"
        )
    elif doc.max_duration and doc.max_duration != doc.duration:
        timing += f" (up to {num(doc.max_duration)} s while undecided)"
    return (
        f"{what}, {timing} + {num(doc.warmup)} s warm-up per step, QoS interval "
        f"{num(doc.qos_interval_s)} s, "
        f"{counted(_or(doc.confirm_runs, 0), 'confirmation run')} "
        f"per failure, {counted(study.repeats, 'repeat')}"
    )


def _per_step(study: StudyData) -> str:
    """'Per tile count', or 'Per mail.mailboxes value' for a knob study."""
    return f"Per {study.axis} value" if study.is_knob else "Per tile count"


def _verdict_cell(verdict: str | None, passed: bool) -> Cell:
    if verdict == "noise":  # failed only within noise: not a failure for certain
        return Cell("inconclusive", "warn")
    return mark(passed)


def study_criteria_table(study: StudyData) -> Table:
    """QoS per step and application: verdict and its worst criterion with margin and CI."""
    rows = []
    for st in study.shown_steps():
        for a in st.typed.applications or []:
            worst = a.worst
            more = (a.failed_criteria or 0) - 1
            text = "-" if worst is None else margin_text(worst)
            if worst is not None and more > 0:
                text += f", +{more} more"
            rows.append(
                [
                    Cell(f"{st.key:g}", "num"),
                    Cell(str(a.app)),
                    _verdict_cell(a.verdict, bool(a.passed)),
                    Cell(text),
                ]
            )
    return Table(
        "qos",
        f"QoS {_per_step(study).lower()} and application",
        [study.axis, "application", "QoS", "deciding criterion (margin, 95% CI)"],
        rows,
    )


def study_verdict(study: StudyData) -> Verdict:
    """What was tested, on what, and the capacity found: shown first."""
    headline, status = study_headline(study)
    return Verdict(
        headline=headline,
        status=status,
        facts=study_facts(study),
        tested=study_tested(study),
        notes=study_notes(study),
        criteria=study_criteria_table(study),
    )


# ---------------------------------------------------------------------------------------------
# plain rows for charts


def _qos_limits(study: StudyData) -> dict[tuple[str, str], float]:
    out = {}
    tile = study.typed.tile or results.StudyTile()
    for a in tile.applications or []:
        # A file application keeps its QoS table as read, with no per-criterion limit in ms.
        for c in a.qos if isinstance(a.qos, list) else []:
            if c.max_ms is not None:
                out[(str(a.app), str(c.id))] = float(c.max_ms)
    return out


def study_rows(study: StudyData) -> dict[str, list[dict[str, Any]]]:
    """Plain rows of a study for charts and tables: totals, app metrics, latencies."""
    totals, metrics, latency, shares = [], [], [], []
    limits = _qos_limits(study)
    for st in study.shown_steps():
        step = st.typed
        total = step.total or results.Rates()
        totals.append(
            {
                "tiles": st.key,
                "iops": total.iops,
                "mbps": total.mbps,
                "score": step.score,
                "verdict": "pass" if step.passed else "fail",
            }
        )
        targets: dict[str, float] = {}
        for inst in step.instances or []:  # application instances, as tiles.py wrote them
            if inst.get("target_metric") is not None:
                targets[inst["app"]] = targets.get(inst["app"], 0.0) + inst["target_metric"]
        for a in step.applications or []:
            metrics.append(
                {
                    "app": a.app,
                    "tiles": st.key,
                    "metric": a.metric_total,
                    "target": targets.get(str(a.app)),
                    "unit": a.metric_unit,
                    "verdict": "pass" if a.passed else "fail",
                }
            )
            shares.append({"tiles": st.key, "group": a.app, "mbps": a.mbps, "iops": a.iops})
            for cid, v in (a.worst_latency_ms or {}).items():
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    continue
                latency.append(
                    {
                        "app": a.app,
                        "criterion": cid,
                        "tiles": st.key,
                        "latency_ms": v,
                        "limit_ms": limits.get((str(a.app), cid)),
                    }
                )
    return {"totals": totals, "metrics": metrics, "latency": latency, "shares": shares}


# ---------------------------------------------------------------------------------------------
# sections


def scaling_section(study: StudyData) -> Section:
    """Totals, application metrics, QoS latencies and throughput shares vs tile count."""
    first_at = _first_failure_at(study)
    axis = study.axis
    data = study_rows(study)
    shown = f" (repeat {study.shown_repeat()})" if study.repeats > 1 else ""
    items: list[Figure | Table] = [
        Figure(
            "scaling-totals",
            f"Total throughput vs {axis}",
            charts.scaling_totals(
                data["totals"],
                max_passing=study.answer,
                first_failure=first_at,
                title=f"Total IOPS, MB/s and score vs {axis} (saturation marked){shown}",
                axis=axis,
            ),
        ),
        Figure(
            "scaling-metric",
            f"Application metrics vs {axis}",
            charts.scaling_metric(
                data["metrics"], title=f"Application metrics vs {axis}{shown}", axis=axis
            ),
        ),
    ]
    if data["latency"]:
        items.append(
            Figure(
                "scaling-latency",
                f"Latency vs {axis}",
                charts.scaling_latency(
                    data["latency"],
                    title=f"QoS latencies vs {axis} (worst instance){shown}",
                    axis=axis,
                ),
            )
        )
    mbps, iops = (
        charts.stacked_bars(
            data["shares"],
            x="tiles",
            x_title=axis,
            field=field,
            title=f"{unit} per application vs tile count (stacked)",
        )
        for field, unit in (("mbps", "MB/s"), ("iops", "IOPS"))
    )
    items.append(Figure("scaling-share", f"Throughput per application vs {axis}", mbps | iops))
    return Section("scaling", "Scaling", items)


def study_table(study: StudyData) -> Table:
    """Seed tables 1-3: per tile count, each application's metric and QoS latencies."""
    tile = study.typed.tile or results.StudyTile()
    apps = [str(a.app) for a in tile.applications or []]
    columns = [study.axis]
    lat_ids: dict[str, list[str]] = {}
    for st in study.shown_steps():
        for a in st.typed.applications or []:
            ids = lat_ids.setdefault(str(a.app), [])
            for cid in a.worst_latency_ms or {}:
                if cid not in ids:
                    ids.append(cid)
    for app in apps:
        columns.append(app)
        columns += [f"{app} {cid} (ms)" for cid in lat_ids.get(app, [])]
    columns += ["IOPS", "MB/s", "score", "QoS"]
    rows = []
    for st in study.shown_steps():
        by_app = {str(a.app): a for a in st.typed.applications or []}
        row = [Cell(f"{st.key:g}", "num")]
        for app in apps:
            a = by_app.get(app)
            if a is None:
                row += [Cell("-")] * (1 + len(lat_ids.get(app, [])))
                continue
            row.append(
                Cell(f"{num(a.metric_total)} {a.metric_unit}", "num" if a.passed else "fail")
            )
            for cid in lat_ids.get(app, []):
                row.append(Cell(num((a.worst_latency_ms or {}).get(cid)), "num"))
        total = st.typed.total or results.Rates()
        row += [
            Cell(num(total.iops), "num"),
            Cell(num(total.mbps), "num"),
            Cell(num(st.typed.score), "num"),
            _verdict_cell("noise" if st.typed.within_noise else None, bool(st.typed.passed)),
        ]
        rows.append(row)
    return Table(
        "study-table",
        f"{_per_step(study)}: application metrics and QoS latencies",
        columns,
        rows,
        caption="A failing application's metric is marked red; latencies are the worst instance.",
    )


def steps_table(study: StudyData, home: Path) -> Table:
    """One row per run of every step: why it ran, its verdict, how long it measured, where it
    lives (relative to `home`)."""
    rows = []
    repeats = study.repeats > 1
    steady = any(r.steady for st in study.steps for r in st.typed.runs or [])
    for st in sorted(study.steps, key=lambda s: (s.repeat, s.key)):
        runs = st.typed.runs or [
            results.StepRun(run_id=st.typed.run_id, verdict=None, passed=st.typed.passed)
        ]
        for r in runs:
            run_dir = Path(r.run_dir) if r.run_dir else None
            if run_dir is None and st.run is not None:
                run_dir = st.run.run_dir
            row = [Cell(str(st.repeat), "num")] if repeats else []
            row += [
                Cell(f"{st.key:g}", "num"),
                Cell(str(r.run_id) + (" *" if r.run_id == st.typed.run_id else "")),
                Cell(_or(r.reason, "new")),
                _verdict_cell(r.verdict, bool(r.passed)),
                Cell(num(r.measured_s), "num"),
            ]
            if steady:
                row.append(Cell(steady_cell(r.steady)))
            row.append(
                Cell(relpath(run_dir, home) if run_dir and run_dir.exists() else "(missing)")
            )
            rows.append(row)
    columns = ["repeat"] if repeats else []
    columns += [study.axis, "run (* stands for the step)", "why", "QoS", "measured s"]
    columns += ["steady state"] if steady else []
    columns += ["directory"]
    return Table(
        "steps",
        "Every run of every step (`tilemark report RUN_ID` shows one in detail)",
        columns,
        rows,
        caption="why: new step; confirm = a failure confirmed by another run (the majority "
        "decides); recheck = a failed step run again because a higher step passed.",
    )


def steps_section(study: StudyData) -> Section:
    """Per step: the seed-style table and every stored run."""
    tables = [study_table(study), steps_table(study, study.study_dir)]
    return Section("steps", _per_step(study), tables)


def margins_table(study: StudyData) -> Table:
    """Every QoS criterion of every step: value, limit, margin and confidence interval."""
    rows = []
    for st in study.shown_steps():
        for a in st.typed.applications or []:
            for c in a.criteria or []:
                ci = "-"
                if c.ci_low is not None and c.unit == "ms":
                    ci = f"{num(c.ci_low)} .. {num(c.ci_high)}"
                    if c.ci_bounded is False:
                        ci += " (few samples)"
                value = c.value
                shown = f"{value:.1%}" if c.unit == "fraction" and value is not None else num(value)
                limit = f">= {c.limit:.0%}" if c.unit == "fraction" else num(c.limit)
                margin = c.margin_pct
                rows.append(
                    [
                        Cell(f"{st.key:g}", "num"),
                        Cell(str(a.app)),
                        Cell(str(c.criterion)),
                        Cell(shown, "num"),
                        Cell(limit, "num"),
                        Cell("-" if margin is None else f"{signed_pct(margin, 0)}", "num"),
                        Cell(ci, "num"),
                        Cell(c.decision or "-", "fail" if not c.passed else ""),
                        Cell(str(c.tile or "-"), "num"),
                    ]
                )
    return Table(
        "margins",
        "Every criterion: value, limit, margin and 95% confidence interval",
        [study.axis, "application", "criterion", "value", "limit", "margin", "95% CI (ms)",
         "decision", "tile"],
        rows,
        caption="Whole measurement window, the instance nearest to (or furthest past) its limit. "
        "margin = (value - limit) / limit. inconclusive: the interval straddles the limit.",
    )  # fmt: skip


def margins_section(study: StudyData) -> Section:
    return Section("margins", "QoS margins", [margins_table(study)])


def repeats_section(study: StudyData) -> Section | None:
    """With --repeat: each repetition's answer and how often each answer came."""
    if study.repeats <= 1:
        return None
    doc = study.typed
    rows = []
    for r in doc.repeats or []:
        deciding = r.first_failure.deciding if r.first_failure else None
        answer = r.max_passing_value if study.is_knob else r.max_passing_tiles
        rows.append(
            [
                Cell(str(r.repeat), "num"),
                Cell("none" if answer is None else f"{answer:g}", "num"),
                Cell(num(r.score_at_max), "num"),
                Cell("-" if not deciding else f"{deciding['app']}: {margin_text(deciding)}"),
            ]
        )
    distribution = ", ".join(f"{k} x{v}" for k, v in (doc.distribution or {}).items())
    table = Table(
        "repeats",
        f"Repeats: {distribution}; reported {_answer_text(study)} "
        f"({'stable' if doc.stable else 'not stable'})",
        ["repeat", f"max {study.axis}", "score", "deciding criterion at the first failure"],
        rows,
        caption="The answer is the median of the repeats (the lower one of an even count; a "
        "repeat where nothing passed ranks lowest).",
    )
    return Section("repeats", "Repeats", [table])


def study_distribution(study: StudyData) -> Figure | None:
    """Per application: response-time percentiles of each tile count's merged histograms."""
    rows = []
    for st in study.shown_steps():
        if st.run is None:
            continue
        for app, streams in run_groups(st.run).items():
            for r in distribution_rows(st.run, {app: streams}):
                rows.append({**r, "group": f"{app} @ {_axis_value(study, st.key)}", "app": app})
    if not rows:
        return None
    return Figure(
        "study-distribution",
        "Latency distribution per application and tile count",
        charts.percentiles_per_app(
            rows,
            group_title="step",
            title="Response time percentiles per application at each tile count",
        ),
        caption="Merged histograms of every instance of the application at that tile count.",
    )


def distribution_section(study: StudyData) -> Section | None:
    """The latency distribution per application and tile count, when any step has a run."""
    figure = study_distribution(study)
    if figure is None:
        return None
    return Section("distribution", "Latency distribution", [figure])


def shown_step_sections(study: StudyData) -> list[Section]:
    """Time series of one step's run: at the largest passing count, else the last step."""
    steps = study.shown_steps()
    shown = _best_step(study) or (steps[-1] if steps else None)
    if shown is None or shown.run is None or not shown.run.intervals_path().exists():
        return []
    sections = time_series_sections(
        shown.run, compute_series(shown.run), prefix=f"s{shown.key:g}-".replace(".", "_")
    )
    for sec in sections:
        sec.title = f"{sec.title} at {_axis_value(study, shown.key)} (run {shown.run.run_id})"
    return sections


# ---------------------------------------------------------------------------------------------
# provenance


def study_links(study: StudyData) -> list[tuple[str, Path]]:
    """study.json and the raw files of every step's run."""
    links = [(STUDY_FILE, study.study_dir / STUDY_FILE)]
    for st in study.steps:
        if st.run is not None:
            links += run_links(st.run)
    return links


def study_details(study: StudyData) -> dict[str, Any]:
    """study.json without its steps, and the first step's environment and plan."""
    details: dict[str, Any] = {"study": {k: v for k, v in study.doc.items() if k != "steps"}}
    first_run = study.first_run()
    if first_run is not None:
        details["environment (first step)"] = first_run.environment
        details["plan (first step)"] = first_run.plan
    return details
