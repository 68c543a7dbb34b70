"""The rich consoles tilemark prints to (rich only, so light commands stay light)."""

from __future__ import annotations

import os
import textwrap

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


def say(console: Console, text: str, *, indent: str = "  ", style: str | None = None) -> None:
    """A line of prose: wrapped between words to the console's width (a terminal's, or
    $TILEMARK_COLUMNS) with its continuation lines indented, never in the middle of a word the
    way a terminal breaks a line too long for it; whole on a pipe (PIPE_WIDTH). A word longer
    than the width (a path) is kept whole."""
    width = console.width
    lines = []
    for line in text.split("\n"):
        if len(line) > width:
            lead = " " * (len(line) - len(line.lstrip(" ")))
            line = textwrap.fill(
                line,
                width=width,
                subsequent_indent=lead + indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        lines.append(line)
    console.print("\n".join(lines), markup=False, highlight=False, soft_wrap=True, style=style)
