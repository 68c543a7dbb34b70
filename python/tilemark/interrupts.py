"""SIGINT and SIGTERM, handled the same way in every phase of every command (docs/reliability.md,
Signals): a message, the work so far stored as interrupted, exit status 128 + the signal.

One handler, two behaviours:

- **Inside a stop scope** (`SignalStopper`: a run, a verification pass, a fill, the settle probe,
  a pause, the loop of a study), a signal is recorded and stops what the scope attached (the
  engine, a pass) in order; nothing is raised, so the code that stores results is never cut in
  the middle. The scope's owner reads `signum` and ends with `exit_status`.
- **Outside every scope** (validating options, locking, writing a report), the first signal
  raises `Signalled`, so the phase under way unwinds through its own `finally` and
  `except INTERRUPTS` blocks; the CLI says so and exits 128 + signal. `Signalled` is a
  BaseException but not a KeyboardInterrupt: the command-line library turns a
  KeyboardInterrupt into a silent exit 130 whatever the signal was.

A signal that arrives while an earlier one is being handled is counted, never raised. The first
signal of a command is remembered: a stop scope entered after it (the next step of a study) stops
at once. `handled()` installs the handler for a whole command (the CLI and the API do); a
`SignalStopper` used on its own installs it for its own extent.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, Protocol

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Signalled(BaseException):  # noqa: N818 - an interruption, like KeyboardInterrupt
    """SIGINT or SIGTERM outside a stop scope: unwinds like Ctrl-C; `status` is 128 + signal."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.status = 128 + signum


class Interrupted(Exception):  # noqa: N818 - it is an outcome, not an error
    """A command was interrupted before it stored anything (while its targets were being
    prepared or settled); `status` is the exit status (128 + the signal number)."""

    def __init__(self, status: int):
        super().__init__(f"interrupted (exit status {status})")
        self.status = status


# What an interruption raises: Signalled under the handler, KeyboardInterrupt without it.
INTERRUPTS = (Signalled, KeyboardInterrupt)


def status_of(exc: BaseException) -> int:
    """The exit status of an interruption: 128 + its signal (130 for a plain Ctrl-C)."""
    return exc.status if isinstance(exc, Signalled) else 128 + signal.SIGINT


def signal_name(status: int) -> str:
    """'SIGTERM' for exit status 143 (128 + signal), else 'a signal'."""
    try:
        return signal.Signals(status - 128).name
    except ValueError:
        return "a signal"


class Stoppable(Protocol):
    """What a stop scope stops: an engine run, a verification pass, a cluster run."""

    def stop(self) -> None: ...


class _State:
    """The handler's state for one command: the first signal, how many came, the open scopes."""

    def __init__(self) -> None:
        self.previous: dict[int, Any] | None = None  # handlers to restore; None: not installed
        self.depth = 0
        self.first: int | None = None
        self.count = 0
        self.scopes: list[SignalStopper] = []


_state = _State()


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _state.count += 1
    first = _state.first is None
    if first:
        _state.first = signum
    if _state.scopes:
        for scope in list(_state.scopes):
            scope.signalled(signum)
        return
    if first:
        raise Signalled(signum)


def _install() -> bool:
    """Install the handler (resetting the state) unless it is installed; whether it was
    installed now. Signals can only be handled in the main thread: elsewhere, nothing."""
    if _state.previous is not None:
        _state.depth += 1
        return True
    if threading.current_thread() is not threading.main_thread():
        return False
    _state.first, _state.count, _state.scopes = None, 0, []
    _state.previous = {s: signal.signal(s, _on_signal) for s in SIGNALS}
    _state.depth = 1
    return True


def _uninstall(installed: bool) -> None:
    if not installed or _state.previous is None:
        return
    _state.depth -= 1
    if _state.depth == 0:
        for s, previous in _state.previous.items():
            signal.signal(s, previous)
        _state.previous = None


@contextmanager
def handled() -> Iterator[None]:
    """Handle SIGINT and SIGTERM as this module says for the block (a whole command)."""
    installed = _install()
    try:
        yield
    finally:
        _uninstall(installed)


def pending() -> int | None:
    """The first signal of the current command, or None."""
    return _state.first if _state.previous is not None else None


class SignalStopper:
    """A stop scope: turns SIGINT and SIGTERM into an orderly stop of what is attached (an
    engine run, a verification pass) instead of an exception; `signum` is the first signal
    seen, including one that came before the scope opened."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.handle: Stoppable | None = None
        self._installed = False

    def signalled(self, signum: int) -> None:
        """A signal arrived (called by the handler)."""
        self.count += 1
        if self.signum is None:
            self.signum = signum
            if self.handle is not None:
                self.handle.stop()

    def attach(self, handle: Stoppable) -> None:
        """Stop this handle on a signal (at once if one already arrived)."""
        self.handle = handle
        if self.signum is not None:
            handle.stop()

    def __enter__(self) -> SignalStopper:
        self._installed = _install()
        if _state.previous is not None and _state.first is not None:
            # The command was interrupted before this scope: it stops before it starts.
            self.signum, self.count = _state.first, 1
        _state.scopes.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self in _state.scopes:
            _state.scopes.remove(self)
        _uninstall(self._installed)

    @property
    def exit_status(self) -> int | None:
        """128 + the first signal, as shells report a process killed by it."""
        return None if self.signum is None else 128 + self.signum
