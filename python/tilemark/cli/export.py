"""`tilemark export`: a run's interval rows and summaries (or a study's steps) as CSV."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.cli.report import note_damage, refusing_unwritable
from tilemark.errors import UsageError
from tilemark.report import CsvExporter, Report, Verdict
from tilemark.report.data import RunData, load_source


def export(
    name: Annotated[
        str,
        typer.Argument(metavar="RUN", help="Run (or study): id, unique id prefix, or directory."),
    ],
    csv_dir: Annotated[
        Path | None,
        typer.Option("--csv", metavar="DIR", help="Directory to write the CSV files into."),
    ] = None,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
) -> None:
    """Export interval rows and per-stream (and per-application) summaries as CSV."""
    if csv_dir is None:
        raise UsageError("--csv DIR is required: the directory to write the CSV files into.")
    if csv_dir.exists() and not csv_dir.is_dir():
        raise UsageError(f"--csv must be a directory, but {csv_dir} is a file.")
    source = load_source(name, results)
    note_damage(source)
    kind = "run" if isinstance(source, RunData) else "study"
    # CSV needs only the stored data, not the charts: a report shell around the source.
    shell = Report(kind=kind, title="", verdict=Verdict("", "info"), source=source)
    with refusing_unwritable(f"--csv {csv_dir}", "choose a directory you can write"):
        written = CsvExporter().export(shell, csv_dir)
    for path in written:
        typer.echo(str(path))
