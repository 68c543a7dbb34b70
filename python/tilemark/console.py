"""The rich consoles tilemark prints to (rich only, so light commands stay light)."""

from __future__ import annotations

import os

from rich.console import Console

# A pipe or a log has no width: tables there are as wide as their content (ids whole, no
# column dropped) and lines are not wrapped, so what is grepped or pasted is what was printed.
PIPE_WIDTH = 1000


def make_console(*, stderr: bool) -> Console:
    """A console on stdout or stderr: the terminal's width (or $COLUMNS when set), else on a
    pipe or log PIPE_WIDTH."""
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
    return console
