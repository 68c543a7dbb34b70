"""Checks and plan fields of a stream's block sequence, strided zones, write sizes and
priorities by size (options/placement.py parses them; crates/engine/src/fiopatterns.rs runs
them). Plans of streams without them carry none of these fields."""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.options.placement import sequence_plan

# A workload.plan.StreamSpec; not imported, because plan.py imports this module.
StreamSpec = Any


def check_placement(stream: StreamSpec) -> None:
    """What the engine cannot do with these keys (and group commit), in the user's terms."""
    check_group_commit(stream)
    label = stream.label
    if stream.pattern.startswith("sequence:") and (
        stream.random_pct < 100 or (stream.run_length or 1) > 1
    ):
        raise UsageError(
            f"{label('pattern')} sequence places every IO itself; give it a random rw with "
            f"random 100 and no run_length (got random {stream.random_pct:g}%)."
        )
    if stream.zones is not None and (stream.random_pct > 0 or stream.skip is not None):
        raise UsageError(
            f"{label('zones')} moves a sequential stream from zone to zone; give it rw read, "
            "write or rw (random 0) and no skip."
        )
    if stream.priority_by_size is not None and stream.priority_share is not None:
        raise UsageError(
            f"{label('priority_by_size')} and {stream.key('priority_share')} both draw the "
            "priority of IOs; give one of them (fio: cmdprio_bssplit and cmdprio_percentage "
            "are mutually exclusive)."
        )


def check_regions(stream: StreamSpec, regions: list[dict[str, Any]]) -> None:
    """Strided zones move through one region."""
    if stream.zones is not None and len(regions) > 1:
        raise UsageError(
            f"{stream.label('zones')} moves through one region; give the stream one target."
        )


def pattern_plan(pattern: str) -> dict[str, Any] | None:
    """The plan pattern of a sequence, None for other patterns."""
    return sequence_plan(pattern) if pattern.startswith("sequence:") else None


def plan_fields(spec: StreamSpec) -> dict[str, Any]:
    """The plan fields of these keys, only those set."""
    fields: dict[str, Any] = {}
    if spec.write_sizes is not None:
        fields["write_sizes"] = [[size, weight] for size, weight in spec.write_sizes]
    if spec.zones is not None:
        size, zone_range, skip = spec.zones
        fields["zones"] = {"size": size, "range": zone_range, "skip": skip}
    if spec.priority_by_size is not None:
        entries: dict[tuple[str, int], list[dict[str, Any]]] = {}
        for op, size, pct, klass, level, hint in spec.priority_by_size:
            share = {"pct": pct, "class": klass, "level": level}
            entries.setdefault((op, size), []).append(share | ({"hint": hint} if hint else {}))
        fields["ioprio_by_size"] = [
            {"op": op, "size": size, "shares": shares} for (op, size), shares in entries.items()
        ]
    return fields


def check_group_commit(stream: StreamSpec) -> None:
    """Group commit joins appended log writes arriving at a rate (the engine's rule, plan.rs
    validate_group), said before anything runs."""
    if not stream.sync.endswith(":group"):
        return
    why = None
    if stream.arrival == "closed":
        why = f"an open-loop arrival: give {stream.key('rate')}"
    elif stream.read_pct != 0:
        why = f"writes only: rw write (it has {stream.read_pct:g}% reads)"
    elif stream.random_pct != 0:
        why = "sequential writes: rw write, appended as a log is"
    elif stream.burst is not None or stream.writeback or stream.flow is not None:
        why = "no burst, writeback or flow"
    if why is not None:
        raise UsageError(f"{stream.label('sync')} {stream.sync} (group commit) needs {why}.")
