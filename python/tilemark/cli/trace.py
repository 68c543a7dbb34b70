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


from tilemark.cli.trace_capture import trace_capture  # noqa: E402  (subcommands register below)

trace_app.command("capture", no_args_is_help=True)(trace_capture)
