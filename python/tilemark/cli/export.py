"""`tilemark export`: a run's interval rows and summaries (or a study's steps) as CSV, or a run
as the fio job that issues the same IO (`--fio`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.cli.report import note_damage, refusing_unwritable
from tilemark.errors import UsageError
from tilemark.fio import FIO_EXPORT_MARK, job_text
from tilemark.report import CsvExporter, Report, Verdict
from tilemark.report.data import RunData, load_source
from tilemark.store.outputs import starts_with, write_file


def export(
    name: Annotated[
        str,
        typer.Argument(metavar="RUN", help="Run (or study): id, unique id prefix, or directory."),
    ],
    csv_dir: Annotated[
        Path | None,
        typer.Option("--csv", metavar="DIR", help="Directory to write the CSV files into."),
    ] = None,
    fio_file: Annotated[
        Path | None,
        typer.Option(
            "--fio",
            metavar="FILE",
            help="Write the run's workload as a fio job file, to cross-check with fio.",
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
    """Export interval rows and per-stream (and per-application) summaries as CSV, or a run as
    a fio job file."""
    if csv_dir is None and fio_file is None:
        raise UsageError(
            "--csv DIR or --fio FILE is required: where to write the CSV files or the fio job."
        )
    if fio_file is not None:
        export_fio(name, fio_file, results, force=force)
        if csv_dir is None:
            return
    if csv_dir.exists() and not csv_dir.is_dir():
        raise UsageError(f"--csv must be a directory, but {csv_dir} is a file.")
    source = load_source(name, results)
    status = note_damage(source)
    kind = "run" if isinstance(source, RunData) else "study"
    # CSV needs only the stored data, not the charts: a report shell around the source.
    shell = Report(kind=kind, title="", verdict=Verdict("", "info"), source=source)
    with refusing_unwritable(f"--csv {csv_dir}", "choose a directory you can write"):
        written = CsvExporter().export(shell, csv_dir, force=force)
    for path in written:
        typer.echo(str(path))
    if status:
        raise typer.Exit(status)


def export_fio(name: str, fio_file: Path, results: Path, *, force: bool = False) -> None:
    """The run's engine plan as a fio job file (tilemark.fio.export)."""
    source = load_source(name, results)
    if not isinstance(source, RunData):
        raise UsageError(
            f"--fio exports one run, but {name} is a study; pass the id of one of its runs."
        )
    doc = source.doc
    if not doc.get("plan"):
        raise UsageError(f"run {doc.get('run_id', name)} has no engine plan to export.")
    title = (
        f"the workload of tilemark run {doc.get('run_id')} ({doc.get('workload', {}).get('name')})"
    )
    with refusing_unwritable(f"--fio {fio_file}", "choose a file you can write"):
        write_file(
            fio_file,
            job_text(
                doc["plan"],
                title=title,
                steadystate=(doc.get("workload") or {}).get("steadystate"),
                stream_rules=(doc.get("workload") or {}).get("stream_rules"),
            ),
            force=force,
            ours=starts_with(FIO_EXPORT_MARK.encode()),
            what="--fio",
        )
    typer.echo(str(fio_file))
