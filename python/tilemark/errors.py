"""Errors the user can fix by changing their input."""

from __future__ import annotations


class UsageError(Exception):
    """Bad user input: one sentence that names the field and says what is allowed.

    The CLI prints it as `tilemark: error: <sentence>` and exits with status 2, before any IO.
    """


class RunError(Exception):
    """A failure while running (an OS error preparing a target, a failed write of results).

    The CLI prints it as `tilemark: error: <message>` and exits with status 1.
    """
