"""`tilemark scale`: how many tiles (or how much of one application) the storage carries.

Parses the options, sets up the study (study/scale.py), runs it on the study framework
(study/base.py) and prints its tables and headline; study.json and the report are written in
`<results>/studies/<id>/`. Exit status: 0 when the study found its answer, 3 when no step
passes QoS, 128 + signal when interrupted.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tilemark.analysis.tiles import margin_text
from tilemark.cli.common import (
    EXIT_QOS,
    argv_of,
    consoles,
    qos_lines,
    verdict_line,
)
from tilemark.cli.params import argument, check_mode, table_command
from tilemark.commands import Interrupted
from tilemark.commands import scale as scale_command
from tilemark.console import say
from tilemark.options import SCALE, Option
from tilemark.options.typed import Options
from tilemark.run.live import hosts_table
from tilemark.store import results
from tilemark.study import (
    CONFIRM,
    EXTEND,
    RECHECK,
    Attempt,
    StepRecord,
    StepSpec,
)
from tilemark.study.answers import (
    answer,
    answer_phrase,
    answer_runs,
    caveat_notes,
    step_name,
    value_text,
)
from tilemark.telemetry.sampler import tool_bound_line
from tilemark.wording import counted, signed_pct


class _Progress:
    """Prints each run of the study as it starts and ends (stderr)."""

    def __init__(self, console: Console, kind: str, repeat: int):
        self.console = console
        self.kind = kind
        self.repeat = repeat

    def starting(self, spec: StepSpec, reason: str, repeat: int, attempt: int) -> None:
        prefix = f"repeat {repeat}/{self.repeat}: " if self.repeat > 1 else ""
        why = ""
        if reason == CONFIRM:
            why = f" (confirming its failure: run {attempt})"
        elif reason == RECHECK:
            why = " (re-check: a higher step passed)"
        elif reason == EXTEND:
            why = " (inconclusive and bounding the answer: measuring again, up to twice as long)"
        self.console.print(f"{self.kind}: {prefix}{spec.label}{why}", markup=False)

    def finished(self, step: StepRecord, attempt: Attempt) -> None:
        if attempt.verdict is None:
            return
        apps = _apps_of(step, attempt)
        say(self.console, verdict_line(apps))
        for line in qos_lines(apps):
            say(self.console, line)
        bound = tool_bound_line(attempt.detail.get("tool_bound"))
        if bound is not None:  # why a failure is run again, and what the headline will say
            say(self.console, f"  {bound}")


def _apps_of(step: StepRecord, attempt: Attempt) -> dict[str, Any]:
    d = attempt.detail
    return {
        "passed": attempt.passed,
        "verdict": attempt.verdict,
        "tiles": step.spec.params["tiles"],
        "score": d.get("score"),
        "measurement": d.get("measurement"),
        "applications": d.get("applications") or [],
    }


def _clash(o: Option) -> str:  # every option of scale applies to scale
    return f"{o.flag} does not apply to scale."


def _scale(ctx: typer.Context, values: dict[str, Any]) -> None:
    tile_file = values.pop("tile_file_arg")
    check_mode(values, SCALE, {SCALE}, _clash)
    opts = Options.from_values(values, SCALE)
    json_out = opts.output.json
    out, err = consoles(json_out)
    try:
        setup, outcome = scale_command.run(
            opts,
            tile_file,
            argv=argv_of(ctx),
            console=err,
            events=_Progress(err, "scale", opts.study.repeat or 1),
        )
    except Interrupted as e:  # interrupted while preparing or settling
        raise typer.Exit(e.status) from None
    doc = outcome.doc
    if outcome.interrupted is not None:
        why = "a run failed" if outcome.interrupted == 1 else "interrupted"
        err.print(f"{why}: the study so far is kept, marked incomplete", markup=False)
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    typed = results.read_study(doc)
    for table in study_tables(typed):
        out.print(table)
    for line in failure_lines(typed, doc):
        say(out, line)
    for line in headline(typed):
        say(out, line)
    out.print(f"study: {outcome.path}", markup=False)
    if opts.output.report and doc["steps"]:
        write_study_report(outcome.path, opts.output.results, err, out)
    if outcome.interrupted is not None:
        raise typer.Exit(outcome.interrupted)
    if doc.get(setup.make_study().answer_key) is None:
        raise typer.Exit(EXIT_QOS)


def write_study_report(study_dir: Path, results: Path, err: Console, out: Console) -> None:
    """The study's HTML report; a failure here never loses the study, which is already saved."""
    from tilemark.report import REPORT_FILE, HtmlExporter, build_report
    from tilemark.report.data import load_source

    try:
        doc = build_report(load_source(str(study_dir), results))
        (path,) = HtmlExporter().export(doc, study_dir / REPORT_FILE)
    except Exception as e:  # the report is a view of stored data; say why and carry on
        err.print(
            f"note: the report could not be written ({e}); try `tilemark report {study_dir}`",
            markup=False,
        )
        return
    out.print(f"report: {path}", markup=False)


# -----------------------------------------------------------------------------------------------
# Terminal tables and lines


def _axis(doc: results.StudyDoc) -> tuple[str, str]:
    """(column title, step field) of the study's axis."""
    return ("tiles", "tiles") if doc.kind != "knob" else (str(doc.knob), "value")


def _axis_value(doc: results.StudyDoc, step: results.StudyStep | results.FirstFailure) -> Any:
    """A step's (or the first failure's) place on the study's axis: its tile count or value."""
    return step.value if doc.kind == "knob" else step.tiles


def _axis_text(key: Any) -> str:
    return f"{key:g}" if isinstance(key, float) else str(key)


def _step_qos(s: results.StudyStep) -> str:
    if s.verdict is None:
        return "incomplete"
    votes = s.votes or {}
    runs = sum(votes.values())
    of = ""
    if runs > 1:
        agree = votes.get("pass", 0) if s.passed else runs - votes.get("pass", 0)
        of = f" ({agree} of {runs} runs)"
    bound = ", tool-bound" if s.tool_bound else ""
    if s.passed:
        return "pass" + of + bound
    n_failed = counted(len(s.failed or []), "criterion", "criteria")
    if s.within_noise:
        return f"inconclusive ({n_failed}){of}{bound}"
    return f"FAIL ({n_failed}){of}{bound}"


def study_tables(doc: results.StudyDoc) -> list[Table]:
    """The seeds' tables: per step, each application's metric (summed over tiles), then the
    QoS latencies of the worst instance with their margin to the limit."""
    tile: Any = doc.tile  # a tile study always records its tile
    apps = [a.app for a in tile.applications or []]
    axis_title, _ = _axis(doc)
    repeats = (doc.repeat if doc.repeat is not None else 1) > 1
    title = (
        f"scaling study {doc.study_id} ({tile.name} tile): application metrics"
        if doc.kind != "knob"
        else f"knob study {doc.study_id} ({doc.knob}, "
        f"{counted(doc.tiles_per_step, 'tile')}): application metrics"  # type: ignore[arg-type]
    )
    if doc.label:
        title = f"{doc.label}: {title}"
    metrics = Table(title=title, title_justify="left")
    latency = Table(
        title="QoS latency, worst instance (ms, margin to the limit)", title_justify="left"
    )
    for t in (metrics, latency):
        if repeats:
            t.add_column("rep", justify="right")
        t.add_column(axis_title, justify="right")
        for a in apps:
            t.add_column(a, justify="right")
    steps = doc.steps or []
    steady = any(s.steady for s in steps)
    # tilemark.report (altair, vl-convert) loads only to print a finished study, not to parse
    # its options: bad input is refused in a fraction of a second.
    from tilemark.report.format import steady_cell

    for col in ("IOPS", "MB/s", "score", "QoS") + (("steady",) if steady else ()):
        metrics.add_column(col, justify="left" if col in ("QoS", "steady") else "right")
    for s in steps:
        by_app = {a.app: a for a in s.applications or []}
        first = [str(s.repeat)] if repeats else []
        first.append(_axis_text(_axis_value(doc, s)))
        mrow, lrow = list(first), list(first)
        for a in apps:
            r = by_app.get(a)
            if r is None:
                mrow.append("-")
                lrow.append("-")
                continue
            digits = 0 if r.metric_unit in ("mailboxes", "IOPS") else 1
            mark = "" if r.passed else " ✗"
            mrow.append(f"{r.metric_total:,.{digits}f} {r.metric_unit}{mark}")
            lrow.append(_latency_cell(r))
        total = s.total or results.Rates()
        mrow += [
            f"{_or(total.iops, 0):,.0f}",
            f"{_or(total.mbps, 0):,.1f}",
            "-" if s.score is None else f"{s.score:.2f}",
            _step_qos(s),
        ]
        if steady:
            mrow.append(steady_cell(s.steady))
        metrics.add_row(*mrow)
        latency.add_row(*lrow)
    hosts = [(_axis_text(_axis_value(doc, s)), h) for s in steps for h in s.hosts or []]
    if hosts:
        return [metrics, latency, hosts_table(hosts, f"per host ({axis_title}; merged above)")]
    return [metrics, latency]


def _or(value: Any, default: Any) -> Any:
    return default if value is None else value


def _latency_cell(app: results.StepApp) -> str:
    criteria = {c.criterion: c for c in app.criteria or []}
    lines = []
    for cid, v in (app.worst_latency_ms or {}).items():
        if v is None:
            lines.append(f"{cid} -")
            continue
        c = criteria.get(cid)
        margin = f" ({signed_pct(c.margin_pct, 0)})" if c and c.margin_pct is not None else ""
        lines.append(f"{cid} {v:,.1f}{margin}")
    return "\n".join(lines) or "-"


def failure_lines(doc: results.StudyDoc, raw: dict[str, Any]) -> list[str]:
    """Why the step that bounds the answer failed: one line per failing or inconclusive
    application. `raw` is study.json as read: qos_lines words a step's applications as live
    runs report them."""
    first = doc.first_failure
    if not first:
        return []
    at = _axis_value(doc, first)
    step = next(
        (
            raw_step
            for s, raw_step in zip(doc.steps or [], raw["steps"], strict=True)
            if _axis_value(doc, s) == at and not s.passed and s.verdict
        ),
        None,
    )
    where = step_name(doc, at)
    one = doc.kind == "knob" or at == 1
    if first.within_noise:
        lines = [f"{where}: QoS inconclusive (no criterion failed for certain):"]
    else:
        lines = [f"{where} {'fails' if one else 'fail'} QoS:"]
    if step is not None:
        apps = {
            "tiles": step.get("tiles", 1),
            "applications": step.get("applications") or [],
        }
        lines += qos_lines(apps)
    else:
        lines += [f"  {f}" for f in (first.failed or [])[:6]]
    return lines


def headline(doc: results.StudyDoc) -> list[str]:
    """The answer with what it is worth, how it was reached, and what decided it."""
    best = answer(doc)
    used = f"{counted(doc.runs_used, 'run')}, {doc.mode}"  # type: ignore[arg-type]
    lines = []
    if doc.kind == "knob":
        what = f"max {doc.knob} at {counted(doc.tiles_per_step, 'tile')}"  # type: ignore[arg-type]
    else:
        what = "max passing tiles"
    if best is None:
        lines.append(f"no {'tile count' if doc.kind != 'knob' else 'value'} passes QoS ({used})")
    else:
        score = f", score {doc.score_at_max:.2f}" if doc.score_at_max is not None else ""
        lines.append(f"{what}: {answer_phrase(doc)}{score} ({used})")
    runs = answer_runs(doc)
    if len(runs) > 1:
        listed = ", ".join(value_text(v) for v in runs)
        agree = "all agree" if doc.stable else "they differ; the median is reported"
        lines.append(f"  {len(runs)} repeats: {listed} ({agree})")
    first = doc.first_failure
    if first and first.deciding:
        d = first.deciding  # criterion_json with app and tile (analysis/tiles.margin_text)
        where = step_name(doc, _axis_value(doc, first))
        tile = f" in tile {d['tile']}" if d.get("tile") and doc.kind != "knob" else ""
        if first.within_noise:
            lines.append(
                f"  bounded at {where} by {d['app']}, inconclusive: {margin_text(d)}{tile}"
            )
        else:
            lines.append(f"  decided at {where} by {d['app']}: {margin_text(d)}{tile}")
    lines += [f"  {note}" for note in caveat_notes(doc)]
    for nm in doc.non_monotonic or []:
        lines.append(
            f"  not monotonic: {value_text(nm.failed)} failed but "
            f"{value_text(nm.passed_above)} passed (after a re-check); the storage's answer "
            "is within its noise there"
        )
    unsteady = [
        s for s in doc.steps or [] if s.steady and not s.steady.steady and not s.steady.rule_met
    ]
    if unsteady:
        axis_title, _ = _axis(doc)
        listed = ", ".join(value_text(_axis_value(doc, s)) for s in unsteady)
        lines.append(
            f"  not steady at {axis_title} {listed}: those steps were judged over all they "
            "measured while the storage was still changing"
        )
    if doc.settle:
        st = doc.settle
        state = "steady" if st.steady else "not steady"
        lines.append(f"  settled {st.seconds:.0f} s after the fill ({state})")
    return lines


TILE_ARG = argument(
    "tile_file_arg",
    "TILE.toml",
    "Tile file, or a profile (name or file) as a tile of one application "
    "(default: mail+oltp+dss+web+backup).",
)

scale = table_command(
    "scale",
    "Add tiles until an application's QoS fails; report the largest passing tile count.",
    {SCALE},
    _scale,
    [TILE_ARG],
)
