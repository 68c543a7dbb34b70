"""Errors the user can fix by changing their input, and the bounds on what an error quotes."""

from __future__ import annotations

import re

# A value quoted in an error is cut to this many characters (a 100 MB string in a TOML file
# must not come back as 100 MB of output).
MAX_QUOTE = 60
# Any unbroken run of characters longer than this in a message (a value quoted whole, a line
# of a file) is cut to an excerpt; paths are shorter than this.
MAX_WORD = 240
# And no message is longer than this.
MAX_MESSAGE = 2000
_LONG_WORD = re.compile(rf"\S{{{MAX_WORD + 1},}}")


def excerpt(text: str, limit: int = MAX_QUOTE) -> str:
    """`text` as an error quotes it: whole when short, else its start, an ellipsis and how long
    it is."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text):,} characters)"


def bounded(message: str) -> str:
    """A message fit to print: long runs of characters cut to excerpts, at most MAX_MESSAGE."""
    message = _LONG_WORD.sub(lambda m: excerpt(m.group(0)), message)
    return excerpt(message, MAX_MESSAGE)


class UsageError(Exception):
    """Bad user input: one sentence that names the field and says what is allowed.

    The CLI prints it as `tilemark: error: <sentence>` and exits with status 2, before any IO.
    A value quoted in it is cut to an excerpt (`bounded`).
    """

    def __init__(self, message: object = "") -> None:
        super().__init__(bounded(str(message)))


class RunError(Exception):
    """A failure while running (an OS error preparing a target, a failed write of results).

    The CLI prints it as `tilemark: error: <message>` and exits with status 1.
    """
