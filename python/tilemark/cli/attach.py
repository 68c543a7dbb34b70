"""`tilemark attach RUN FILE.csv`: counters from the storage side, aligned with a stored run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.cli.report import refusing_unwritable
from tilemark.telemetry.attach import attach


def attach_command(
    name: Annotated[
        str,
        typer.Argument(
            metavar="RUN",
            help="Run: id, unique id prefix, or directory; or a study, whose every run takes "
            "the rows within its own span.",
        ),
    ],
    csv_file: Annotated[
        Path,
        typer.Argument(
            metavar="FILE.csv",
            help="Time-stamped counters from the storage (a timestamp column, then numeric "
            "columns), as array CLIs export them.",
        ),
    ],
    offset: Annotated[
        str | None,
        typer.Option(
            "--offset",
            metavar="TIME",
            help="Added to the file's timestamps to put them on this host's clock: 2s when the "
            "storage's clock is 2 s behind, -2s when ahead (default 0).",
        ),
    ] = None,
    time_column: Annotated[
        str | None,
        typer.Option(
            "--time-column",
            metavar="NAME",
            help="The timestamp column: ISO 8601 (no zone: this host's local time) or epoch "
            "seconds (default: the first column named like time, timestamp or date).",
        ),
    ] = None,
    source: Annotated[
        str | None,
        typer.Option(
            "--name",
            metavar="NAME",
            help="Name of this set of counters in the run; attaching a name again replaces "
            "it (default: the file's name without .csv).",
        ),
    ] = None,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
) -> None:
    """Attach time-stamped counters from the storage side (array CLIs' CSV) to a stored run:
    reports show them beside tilemark's intervals, `export --csv` writes them."""
    with refusing_unwritable(f"the counters of {name}", "check the results directory"):
        done = attach(
            name, csv_file, results=results, offset=offset, time_column=time_column, source=source
        )
    for note in done.notes:
        typer.echo(f"note: {note}", err=True)
    for a in done.attached:
        s = a.source
        counters = ", ".join(s["counters"][:6]) + (", ..." if len(s["counters"]) > 6 else "")
        typer.echo(
            f"attached {s['rows_kept']} rows x {len(s['counters'])} counters ({counters}) "
            f"to run {a.run_id} as {s['name']!r}: {a.path}"
        )
