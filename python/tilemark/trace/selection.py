"""Which rows of a trace a replay takes: `--select pid=..,comm=..,op=..` (docs/replay.md).
trace/iolist.py applies the selection while it reads a trace."""

from __future__ import annotations

import re
from dataclasses import dataclass

from tilemark.errors import UsageError
from tilemark.trace.schema import OPS


@dataclass(frozen=True)
class Selection:
    """Which rows of a trace are replayed: every condition given must hold (pid=1,pid=2 means
    either pid)."""

    pids: frozenset[int] = frozenset()
    comms: frozenset[str] = frozenset()
    ops: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.pids or self.comms or self.ops)

    def describe(self) -> str:
        """pid=12,comm=postgres as the user would write it."""
        parts = [f"pid={p}" for p in sorted(self.pids)]
        parts += [f"comm={c}" for c in sorted(self.comms)]
        parts += [f"op={o}" for o in sorted(self.ops)]
        return ",".join(parts)


def parse_select(text: str | None) -> Selection:
    """`pid=N,comm=NAME,op=read|write|flush|discard` (keys may repeat: either value)."""
    if not text:
        return Selection()
    pids: set[int] = set()
    comms: set[str] = set()
    ops: set[str] = set()
    for part in text.split(","):
        key, eq, value = part.strip().partition("=")
        key = key.strip().lower()
        value = value.strip()
        if not eq or not value:
            raise UsageError(
                f"--select {text!r}: each condition is KEY=VALUE with KEY pid, comm or op "
                f"(e.g. pid=1234,op=write), got {part.strip()!r}."
            )
        if key == "pid":
            if not re.fullmatch(r"\d+", value):
                raise UsageError(f"--select pid must be a process id (digits), got {value!r}.")
            pids.add(int(value))
        elif key == "comm":
            comms.add(value)
        elif key == "op":
            if value not in OPS:
                raise UsageError(f"--select op must be one of {', '.join(OPS)}, got {value!r}.")
            ops.add(value)
        else:
            raise UsageError(
                f"--select knows the keys pid, comm and op, got {key!r} (in {text!r})."
            )
    return Selection(frozenset(pids), frozenset(comms), frozenset(ops))
