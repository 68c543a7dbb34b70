"""The rich consoles tilemark prints to (rich only, so light commands stay light)."""

from __future__ import annotations

from rich.console import Console


def make_console(*, stderr: bool) -> Console:
    """A console on stdout or stderr; on a pipe or log, 160 columns wide (the results table
    needs about 130, and a pipe has no width of its own)."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, width=160)
    return console
