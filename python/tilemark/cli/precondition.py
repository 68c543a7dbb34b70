"""`tilemark precondition`: write every target's whole data area sequentially, N passes
(SNIA PTS workload-independent preconditioning), and record it with the target."""

from __future__ import annotations

from typing import Any

import typer

from tilemark.cli.common import argv_of
from tilemark.cli.params import table_command
from tilemark.commands import precondition as precondition_command_
from tilemark.options import PRECONDITION
from tilemark.options.typed import Options
from tilemark.targets.precondition import main_console


def _precondition(ctx: typer.Context, values: dict[str, Any]) -> None:
    opts = Options.from_values(values, PRECONDITION)
    _, status = precondition_command_.run(opts, argv=argv_of(ctx), console=main_console())
    if status:
        raise typer.Exit(status)


precondition_command = table_command(
    "precondition",
    "Precondition targets as the SNIA PTS prescribes: sequential 128 KiB writes over the whole "
    "data area, twice by default; later runs show the record in their provenance.",
    {PRECONDITION},
    _precondition,
)
