"""`tilemark compare`: runs (or studies) of one workload, normalized to a baseline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich import box
from rich.table import Table

from tilemark.analysis.compare import Comparison, compare_points, compare_runs, compare_studies
from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.console import make_console
from tilemark.errors import UsageError
from tilemark.report import HtmlExporter, compare_report
from tilemark.report.data import RunData, StudyData, load_source
from tilemark.report.format import num
from tilemark.report.points_report import POINT_KINDS
from tilemark.wording import signed_pct


def _key(source: RunData | StudyData) -> Path:
    path = source.run_dir if isinstance(source, RunData) else source.study_dir
    return path.resolve()


def _label(m) -> str:
    name = m.name
    if m.name.endswith((" mean", " p99")) and m.unit == "ms":
        op, _lat, stat = m.name.split(" ")
        name = f"{op} {stat} (ms)"
    elif m.unit and m.unit != m.name:
        name = f"{m.name} ({m.unit})"
    if m.scope not in ("total", m.name):
        name += f" {m.scope.removeprefix('total ')}"
    return name + (" ↓" if m.better == "lower" else "")


def comparison_table(c: Comparison) -> Table:
    """Rich table: every metric of every run, with its change from the baseline."""
    b = c.baseline
    labels = c.labels or [None] * len(c.names)
    heads = [f"{n}\n{lb}" if lb else n for n, lb in zip(c.names, labels, strict=True)]
    if c.normalized_to:
        title = (
            f"{c.workload}: every value divided by baseline {c.shown[b]} at {c.normalized_to} "
            "(1.00); in parentheses the change from the baseline's same point (↓ lower is "
            "better)"
        )
    else:
        title = f"{c.workload}: change from baseline {c.shown[b]} (↓ lower is better)"
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("metric", no_wrap=True)
    table.add_column(f"{heads[b]}\n(baseline)", justify="right", no_wrap=True)
    others = [i for i in range(len(c.names)) if i != b]
    for i in others:
        table.add_column(heads[i], justify="right", no_wrap=True)
    normalized = c.normalized_to is not None

    def shown(m, i: int) -> str:
        if not normalized:
            return num(m.values[i])
        return "-" if m.normalized[i] is None else f"{m.normalized[i]:.2f}"

    for m in c.metrics:
        row = [_label(m), shown(m, b)]
        for i in others:
            change = m.change_pct[i]
            if change is None:
                row.append(shown(m, i))
                continue
            better = (change > 0) == (m.better == "higher")
            style = "" if abs(change) < 0.05 else ("green" if better else "red")
            text = signed_pct(change)
            if normalized:
                text = f"({text})"
            row.append(f"{shown(m, i)} [{style}]{text}[/]" if style else f"{shown(m, i)} {text}")
        table.add_row(*row)
    return table


def _first_and_last(name: str, results: Path) -> list[str]:
    """The first and last complete repetition of a repeat study (as run directories)."""
    source = load_source(name, results)
    if not (isinstance(source, StudyData) and source.doc.get("kind") == "repeat"):
        raise UsageError(
            "compare needs at least two runs or studies, e.g. RUN_A RUN_B (or one repeat study)."
        )
    first, last = source.doc.get("first_run_id"), source.doc.get("last_run_id")
    if not first or not last:
        raise UsageError(
            f"repeat study {source.study_id} has fewer than two complete repetitions to compare."
        )
    runs = {s.step.get("run_id"): s.run for s in source.steps}
    if runs.get(first) is None or runs.get(last) is None:
        raise UsageError(f"the runs of repeat study {source.study_id} are no longer stored.")
    return [str(runs[first].run_dir), str(runs[last].run_dir)]


def compare(
    names: Annotated[
        list[str],
        typer.Argument(
            metavar="RUN_A RUN_B [RUN_C ...]",
            help="Runs, or studies (scaling, sweep, matrix, curve) of the same definition: ids, "
            "prefixes or directories. "
            "A repeat study alone compares its first and last repetition.",
        ),
    ],
    baseline: Annotated[
        str | None,
        typer.Option(
            "--baseline",
            metavar="RUN",
            help="The run everything is normalized to (default: first).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option("-o", "--output", metavar="FILE", help="Also write an HTML report here."),
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the comparison as JSON instead of a table.")
    ] = False,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace -o FILE even if tilemark did not write it."),
    ] = False,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
    normalize_to: Annotated[
        str | None,
        typer.Option(
            "--normalize-to",
            metavar="POINT",
            help="Sweeps, matrices, curves: divide every value by the baseline's value at this "
            "point (its number in the points table, or its name such as 8KiB/qd1/r100/100%, "
            "L0/S1 or 50%) instead of the baseline's same point.",
        ),
    ] = None,
) -> None:
    """Compare runs or studies of one workload, normalized to a baseline."""
    if len(names) == 1:
        names = _first_and_last(names[0], results)
    if len(names) < 2:
        raise UsageError("compare needs at least two runs or studies, e.g. RUN_A RUN_B.")
    sources = [load_source(n, results) for n in names]
    kinds = {type(s) for s in sources}
    if len(kinds) > 1:
        study = names[next(i for i, s in enumerate(sources) if isinstance(s, StudyData))]
        run = names[next(i for i, s in enumerate(sources) if isinstance(s, RunData))]
        raise UsageError(
            f"compare takes runs or studies, not both: {study!r} is a study and {run!r} a run."
        )
    keys = [_key(s) for s in sources]
    if len(set(keys)) < len(keys):
        raise UsageError("the same run or study is named twice; name each one once.")
    base = 0
    if baseline is not None:
        wanted = _key(load_source(baseline, results))
        if wanted not in keys:
            raise UsageError(f"--baseline {baseline!r} is not one of the compared runs or studies.")
        base = keys.index(wanted)
    point_studies = isinstance(sources[0], StudyData) and sources[0].doc.get("kind") in POINT_KINDS
    if normalize_to is not None and not point_studies:
        raise UsageError(
            "--normalize-to applies to sweeps, matrices and curves; runs and scaling studies "
            "are normalized to the baseline."
        )
    if isinstance(sources[0], RunData):
        comparison = compare_runs(sources, base)  # type: ignore[arg-type]
    elif point_studies or any(s.doc.get("kind") in POINT_KINDS for s in sources):  # type: ignore[union-attr]
        comparison = compare_points(sources, base, normalize_to)
    else:
        comparison = compare_studies(sources, base)  # type: ignore[arg-type]
    if json_out:
        typer.echo(json.dumps(comparison.to_json(), indent=2))
    else:
        console = make_console(stderr=False)
        console.print(comparison_table(comparison))
        for field, values in comparison.differences:
            console.print(f"{field} differs: " + " | ".join(values), highlight=False, markup=False)
        for line in comparison.data_gain:
            console.print(f"data reduction: {line}", highlight=False, markup=False, soft_wrap=True)
    if output is not None:
        if output.is_dir():
            raise UsageError(f"-o/--output must be a file, but {output} is a directory.")
        (path,) = HtmlExporter().export(compare_report(comparison), output, force=force)
        typer.echo(f"report: {path}", err=json_out)
