"""`tilemark trace`: block traces of real applications (docs/traces.md).

Subcommands live in their own modules and register on `trace_app`: capture (trace_capture),
import (trace_import), show (trace_show). Each parses its options, calls the work in
tilemark.trace (which returns a typed result), and prints it.
"""

from __future__ import annotations

import typer

trace_app = typer.Typer(
    help="Capture, import and look at block traces of real applications (docs/traces.md).",
    no_args_is_help=True,
    add_completion=False,
)


@trace_app.callback()
def _trace() -> None:
    """Capture, import and look at block traces of real applications (docs/traces.md)."""


# Subcommands register below; each imports only what its own work needs.
from tilemark.cli.trace_capture import trace_capture  # noqa: E402
from tilemark.cli.trace_import import trace_import  # noqa: E402
from tilemark.cli.trace_show import trace_show  # noqa: E402

trace_app.command("capture", no_args_is_help=True)(trace_capture)
trace_app.command("import", no_args_is_help=True)(trace_import)
trace_app.command("show", no_args_is_help=True)(trace_show)
