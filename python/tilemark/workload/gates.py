"""Streams that start when others have ended: a stream's `after` (fio's stonewall).

    [[stream]]
    name = "fill"
    rw = "write"
    passes = 1              # ends by its bytes

    [[stream]]
    name = "steady"
    rw = "randwrite"
    after = "fill"          # starts when fill has ended (every copy, its IOs completed)
    stop = "5m"             # start and stop count from that moment

The engine opens the gate (plan.rs `after`) at the moment the last of those streams ended, on
any engine thread, and reports each stream's actual start and end (result `spans`), which the
summary rates it over. A stream waited for must end: by io_size, passes or stop, or by a
`[[steadystate]]` rule with `ends = "streams"` that judges it; otherwise the stream after it
would never start, and the workload is refused.
"""

from __future__ import annotations

from typing import Protocol

from tilemark.errors import UsageError
from tilemark.workload.steadyrule import SteadyRule


class StreamSpec(Protocol):
    """What this module reads of a stream (plan.StreamSpec; plan.py imports this module)."""

    name: str
    after: list[str] | None
    host: str | None

    def ends_by_itself(self) -> bool: ...

    def label(self, key: str) -> str: ...


def _base(name: str) -> str:
    return name.split("@")[0]


def gate_indices(streams: list[StreamSpec], index: int) -> list[int]:
    """Plan indices of the streams stream `index` waits for (a name covers its copies)."""
    names = streams[index].after or []
    return [j for j, s in enumerate(streams) if s.name in names or _base(s.name) in names]


def check_gates(streams: list[StreamSpec], rules: list[SteadyRule]) -> None:
    """Every `after` names streams defined before it that end; raises UsageError."""
    all_names = [s.name for s in streams]
    ended_by_rule = {i for r in rules if r.ends == "streams" for i in r.judged(all_names)}
    for index, stream in enumerate(streams):
        if not stream.after:
            continue
        label = stream.label("after")
        for name in stream.after:
            found = [j for j, s in enumerate(streams) if name in (s.name, _base(s.name))]
            if not found:
                raise UsageError(f"{label} names {name!r}, which is not a stream of this workload.")
            if any(j >= index for j in found):
                raise UsageError(
                    f"{label} names {name!r}, which is not defined before it; a stream waits "
                    "only for streams before it in the file."
                )
            for j in found:
                if not streams[j].ends_by_itself() and j not in ended_by_rule:
                    raise UsageError(
                        f"{label} names {name!r}, which never ends (give it io_size, passes or "
                        "stop, or a [[steadystate]] rule with ends = 'streams'), so this stream "
                        "would never start."
                    )
        if stream.host is not None:
            raise UsageError(f"{label} is not available for streams placed on one host.")


def gated_until_done(streams: list[StreamSpec], rules: list[SteadyRule]) -> bool:
    """A workload with gates whose streams all end (by themselves or by a rule ending them)
    runs until they have, not for a default duration: when its phases end is not known in
    advance."""
    if not any(s.after for s in streams):
        return False
    ended_by_rule = {
        i for r in rules if r.ends == "streams" for i in r.judged([s.name for s in streams])
    }
    return all(s.ends_by_itself() or i in ended_by_rule for i, s in enumerate(streams))
