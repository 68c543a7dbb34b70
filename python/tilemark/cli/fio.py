"""`tilemark import-fio`: a fio job file as a tilemark workload file."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.console import make_console, say
from tilemark.errors import UsageError
from tilemark.fio import toml_text, translate
from tilemark.store.outputs import write_file


def import_fio(
    job_file: Annotated[Path, typer.Argument(metavar="JOB.fio", help="fio job file.")],
    output: Annotated[
        Path | None,
        typer.Option(
            "--output", "-o", metavar="FILE", help="Write the workload here (default: print it)."
        ),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace FILE if it exists.")] = False,
    section: Annotated[
        list[str] | None,
        typer.Option(
            "--section",
            metavar="NAME",
            help="Translate only this job (repeatable), as fio's --section; [global] applies.",
        ),
    ] = None,
) -> None:
    """Translate a fio job file into a tilemark workload (TOML), naming what does not translate."""
    translation = translate(job_file, tuple(section or ()))
    text = toml_text(translation)
    if output is None:
        typer.echo(text, nl=False)
        return
    if output.exists() and not force:
        raise UsageError(f"--output {output} exists; pass --force to replace it.")
    try:
        write_file(output, text, force=force, what="--output")
    except OSError as e:
        raise UsageError(f"--output {output} cannot be written: {e.strerror}.") from None
    for note in translation.notes:
        say(make_console(stderr=True), f"note: {note}")
    typer.echo(str(output))
