"""The report of a scaling study: capacity first, then scaling charts and per-tile-count tables.

study_report() only assembles; each part of the page is one function of the StudyData, so a
new section (or a new fact in the verdict) is one more function and one more line there.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Report, Section, Table, Verdict
from tilemark.report.data import (
    STUDY_FILE,
    StudyData,
    StudyStep,
    compute_series,
    distribution_rows,
    relpath,
    run_groups,
)
from tilemark.report.format import generated_by, mark, num, run_links, tested_on
from tilemark.report.run_report import time_series_sections


def study_report(study: StudyData) -> Report:
    """The report of a scaling study: capacity, scaling charts, per-tile-count tables."""
    verdict = study_verdict(study)
    sections = [scaling_section(study), steps_section(study)]
    distribution = distribution_section(study)
    if distribution is not None:
        sections.append(distribution)
    sections += shown_step_sections(study)
    return Report(
        kind="study",
        title=f"tilemark report: scaling study {study.study_id}",
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
    """The step at the largest passing tile count, if any."""
    return study.step_at(study.doc.get("max_passing_tiles"))


def study_headline(study: StudyData) -> tuple[str, str]:
    """Headline sentence and status (the verdict box's colour) of a study."""
    doc = study.doc
    best = doc.get("max_passing_tiles")
    if best is None:
        headline = "No tile count passes QoS"
        status = "fail"
    else:
        score = f", score {doc['score_at_max']:.2f}" if doc.get("score_at_max") is not None else ""
        headline = f"Max passing tiles: {best}{score}"
        status = "pass"
    if not doc.get("complete", True):
        status = "warn"
    return headline, status


def study_facts(study: StudyData) -> list[tuple[str, str]]:
    """The big numbers: capacity, throughput at capacity, first failure, runs used."""
    doc = study.doc
    best = doc.get("max_passing_tiles")
    first = doc.get("first_failure")
    best_step = _best_step(study)
    at_best = (best_step.step.get("total") if best_step else None) or {}
    return [
        ("max passing tiles", str(best) if best is not None else "none"),
        ("score at max", num(doc.get("score_at_max"))),
        ("IOPS at max", num(at_best.get("iops"))),
        ("MB/s at max", num(at_best.get("mbps"))),
        ("first failure", f"{first['tiles']} tiles" if first else "none"),
        ("runs", str(doc.get("runs_used", len(study.steps)))),
    ]


def study_notes(study: StudyData) -> list[str]:
    """What failed first, and whether the study was cut short."""
    doc = study.doc
    first = doc.get("first_failure")
    notes = []
    if first:
        notes.append(
            f"first failing count ({first['tiles']} tiles): " + "; ".join(first["failed"][:6])
        )
    if not doc.get("complete", True):
        notes.append("the study was interrupted: the steps so far are shown")
    return notes


def study_tested(study: StudyData) -> list[tuple[str, str]]:
    """The tile (applications and their scale), the study settings, and where it ran."""
    doc = study.doc
    tile = doc.get("tile", {})
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
    return tested


def _failed_criteria(step: dict[str, Any], app: str) -> list[str]:
    """The failed criteria of `app` in a step, from its 'tile.app: criterion' texts."""
    return [
        f.split(": ", 1)[1]
        for f in step.get("failed", [])
        if f.split(": ", 1)[0].split(".", 1)[-1] == app
    ]


def study_criteria_table(study: StudyData) -> Table:
    """QoS per tile count and application, with the criteria that failed."""
    rows = []
    for st in study.steps:
        for a in st.step.get("applications", []):
            failed = _failed_criteria(st.step, a["app"])
            rows.append(
                [
                    Cell(str(st.tiles), "num"),
                    Cell(a["app"]),
                    mark(a["passed"]),
                    Cell("; ".join(dict.fromkeys(failed)) or "-"),
                ]
            )
    return Table(
        "qos",
        "QoS per tile count and application",
        ["tiles", "application", "QoS", "failed criteria"],
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
        total = step.get("total") or {}
        totals.append(
            {
                "tiles": st.tiles,
                "iops": total.get("iops"),
                "mbps": total.get("mbps"),
                "score": step.get("score"),
                "verdict": "pass" if step["passed"] else "fail",
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
            shares.append(
                {"tiles": st.tiles, "group": a["app"], "mbps": a["mbps"], "iops": a["iops"]}
            )
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


# ---------------------------------------------------------------------------------------------
# sections


def scaling_section(study: StudyData) -> Section:
    """Totals, application metrics, QoS latencies and throughput shares vs tile count."""
    doc = study.doc
    first = doc.get("first_failure")
    data = study_rows(study)
    items: list[Figure | Table] = [
        Figure(
            "scaling-totals",
            "Total throughput vs tiles",
            charts.scaling_totals(
                data["totals"],
                max_passing=doc.get("max_passing_tiles"),
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
        items.append(
            Figure(
                "scaling-latency",
                "Latency vs tiles",
                charts.scaling_latency(
                    data["latency"], title="QoS latencies vs tile count (worst instance)"
                ),
            )
        )
    mbps, iops = (
        charts.stacked_bars(
            data["shares"],
            x="tiles",
            x_title="tiles",
            field=field,
            title=f"{unit} per application vs tile count (stacked)",
        )
        for field, unit in (("mbps", "MB/s"), ("iops", "IOPS"))
    )
    items.append(Figure("scaling-share", "Throughput per application vs tiles", mbps | iops))
    return Section("scaling", "Scaling", items)


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
            mark(st.step["passed"]),
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
    """One row per step: its run, where the run lives (relative to `home`), its verdict."""
    rows = []
    for st in study.steps:
        run_dir = st.run.run_dir if st.run else None
        rows.append(
            [
                Cell(str(st.tiles), "num"),
                Cell(st.step["run_id"]),
                Cell(relpath(run_dir, home) if run_dir else "(run directory missing)"),
                mark(st.step["passed"]),
                Cell("; ".join(st.step.get("failed", [])[:4]) or "-"),
            ]
        )
    return Table(
        "steps",
        "Steps (one stored run each; `tilemark report RUN_ID` shows one in detail)",
        ["tiles", "run", "directory", "QoS", "failed criteria (first 4)"],
        rows,
    )


def steps_section(study: StudyData) -> Section:
    """Per tile count: the seed-style table and the stored run of each step."""
    return Section(
        "steps", "Per tile count", [study_table(study), steps_table(study, study.study_dir)]
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
    return Figure(
        "study-distribution",
        "Latency distribution per application and tile count",
        charts.percentiles_per_app(
            rows,
            group_title="tile count",
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
    shown = _best_step(study) or (study.steps[-1] if study.steps else None)
    if shown is None or shown.run is None or not shown.run.intervals_path().exists():
        return []
    sections = time_series_sections(shown.run, compute_series(shown.run), prefix=f"t{shown.tiles}-")
    for sec in sections:
        sec.title = f"{sec.title} at {shown.tiles} tiles (run {shown.run.run_id})"
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
