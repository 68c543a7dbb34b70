"""The rich consoles tilemark prints to (rich only, so light commands stay light)."""

from __future__ import annotations

import os

from rich.console import Console

# A pipe or a log has no width: tables there are as wide as their content (ids whole, no
# column dropped) and lines are not wrapped, so what is grepped or pasted is what was printed.
# $COLUMNS is not used for that: GNU readline exports COLUMNS=80 into the environment of every
# child of a process that loaded it (pytest, Python's REPL), so it says nothing about a pipe.
PIPE_WIDTH = 1000
WIDTH_ENV = "TILEMARK_COLUMNS"  # a width to format for, terminal or not (tests, narrow logs)


def make_console(*, stderr: bool) -> Console:
    """A console on stdout or stderr: $TILEMARK_COLUMNS wide when set, else the terminal's
    width, else (a pipe or a log) PIPE_WIDTH."""
    forced = os.environ.get(WIDTH_ENV, "")
    if forced.isdigit() and int(forced) > 0:
        return Console(stderr=stderr, highlight=False, width=int(forced))
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, width=PIPE_WIDTH)
    return console
