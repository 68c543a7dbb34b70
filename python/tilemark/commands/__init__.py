"""The command layer: one module per command (workload runs, tile runs, scale, repeat, sweep,
matrix, curve, precondition). Each takes the typed `Options` built at the edge
(tilemark.options.typed), owns the sequence that every command repeats (validate everything
before any IO -> lock the targets -> prepare them -> run or study -> store), and returns a typed
outcome. The CLI parses, calls one of these, and prints; tilemark.api calls the same functions,
so every command is also a Python call.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from rich.console import Console

from tilemark.interrupts import Interrupted
from tilemark.run.runner import prepare
from tilemark.run.where import Targets, lock

__all__ = ["Interrupted", "held"]


def held(infos: Targets, argv: list[str], console: Console) -> AbstractContextManager[None]:
    """`with held(infos, argv, console):` the targets locked for the block and prepared
    (created, filled) before it runs; Interrupted(128 + signal) when a signal stops the
    preparation (what was filled is kept for next time). Every command runs its runs or study
    inside it."""
    return _held(infos, argv, console)


@contextmanager
def _held(infos: Targets, argv: list[str], console: Console) -> Iterator[None]:
    with lock(infos, argv):
        prepare(infos, console)
        yield
