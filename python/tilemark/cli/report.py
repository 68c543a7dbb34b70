"""`tilemark report`: one self-contained HTML file (or PNG/SVG figures) of a run or a study."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.errors import UsageError
from tilemark.report import REPORT_FILE, HtmlExporter, PngExporter, build_report
from tilemark.report.data import RunData, StudyData, load_source
from tilemark.store.layout import describe_os_error


def note_damage(source: RunData | StudyData) -> int:
    """Say on stderr what of a run cannot be read; the output shows the rest. The exit status
    of the command: 1 when a run is damaged (what it measured is not all there), else 0."""
    runs = [source] if isinstance(source, RunData) else [s.run for s in source.steps if s.run]
    damaged = False
    for run in runs:
        if run.status in ("damaged", "killed"):
            typer.echo(
                f"note: run {run.run_id} is {run.status}: {run.problem}; what can be read is used",
                err=True,
            )
            damaged |= run.status == "damaged"
    return 1 if damaged else 0


@contextmanager
def refusing_unwritable(what: str, fix: str) -> Iterator[None]:
    """An OSError writing an output (a read-only or full filesystem) as one sentence."""
    try:
        yield
    except OSError as e:
        raise UsageError(f"{what} cannot be written: {describe_os_error(e)}; {fix}.") from None


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.0f} kB"


def report(
    name: Annotated[
        str,
        typer.Argument(
            metavar="RUN_OR_STUDY", help="Run or study: id, unique id prefix, or directory."
        ),
    ],
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            metavar="FILE",
            help=f"HTML file to write (default: {REPORT_FILE} in the run or study directory).",
        ),
    ] = None,
    png: Annotated[
        Path | None,
        typer.Option(
            "--png", metavar="DIR", help="Write every figure as PNG and SVG into DIR instead."
        ),
    ] = None,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace files of the same name that tilemark did not write."),
    ] = False,
) -> None:
    """Write a report of a run or a scaling study: verdict, charts, tables, provenance."""
    if output is not None and output.is_dir():
        raise UsageError(f"-o/--output must be a file, but {output} is a directory.")
    if png is not None and png.exists() and not png.is_dir():
        raise UsageError(f"--png must be a directory, but {png} is a file.")
    started = time.monotonic()
    source = load_source(name, results)
    status = note_damage(source)
    doc = build_report(source)
    if png is not None:
        with refusing_unwritable(f"--png {png}", "choose a directory you can write"):
            files = PngExporter().export(doc, png, force=force)
        typer.echo(f"{len(files)} files (PNG and SVG of {len(files) // 2} figures) in {png}")
    if output is not None or png is None:
        dest = output if output is not None else Path(doc.home) / REPORT_FILE
        with refusing_unwritable(f"the report {dest}", "write it elsewhere with -o FILE"):
            (path,) = HtmlExporter().export(doc, dest, force=force)
        typer.echo(
            f"report: {path} ({_size(path.stat().st_size)}, {time.monotonic() - started:.1f} s)"
        )
    if status:
        raise typer.Exit(status)
