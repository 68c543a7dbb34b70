"""The limits that protect the machine tilemark runs on (docs/reliability.md, Limits).

A workload of a million streams, a duration of three million years or a queue of 1 GiB buffers
per stream used to be accepted and then ran the machine out of memory or never ended. Each is
refused before any IO with a sentence: a hard maximum where one exists, and for memory an
estimate of what the run will hold against what the machine has available.
"""

from __future__ import annotations

from typing import Any

from tilemark.errors import UsageError
from tilemark.units import MAX_DURATION_S, MIB, format_size

__all__ = ["MAX_DURATION_S", "MAX_STREAMS", "check_memory", "check_stream_count"]

# Streams in one run (per host of a cluster run): twice the 10,000 the design budgets for 2
# cores; every stream keeps its own histograms and rows in every interval.
MAX_STREAMS = 20_000
# What one stream holds beyond its IO buffers, measured with 2,000 null-backend streams at one
# interval a second (engine state and histograms, interval rows, the summary: about 120 KiB),
# with a margin.
STREAM_MEMORY = 160 * 1024
# The process itself (Python, the engine, pyarrow, DuckDB).
BASE_MEMORY = 256 * MIB


def check_stream_count(count: int, source: str) -> None:
    """Refuse more streams than one run holds, before they are built."""
    if count > MAX_STREAMS:
        raise UsageError(
            f"{source} has {count:,} streams; one run holds at most {MAX_STREAMS:,} (each keeps "
            "its own histograms every interval): use fewer, or spread them over hosts with "
            "--cluster."
        )


def estimated_memory(plan: dict[str, Any]) -> int:
    """Bytes a run of the engine plan holds at most: every stream's state and, per stream,
    a buffer of its largest IO size for every IO it keeps in flight (reads and writes keep
    separate buffers)."""
    total = BASE_MEMORY
    for s in plan.get("streams") or []:
        largest = max((int(size) for size, _ in s.get("sizes") or [[4096, 1]]), default=4096)
        read_pct = float(s.get("read_pct", 100))
        kinds = 2 if 0 < read_pct < 100 else 1
        total += STREAM_MEMORY + int(s.get("qd") or 1) * largest * kinds
    return total


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def check_memory(plan: dict[str, Any]) -> None:
    """Refuse a plan whose run would not fit in the memory this machine has available."""
    need = estimated_memory(plan)
    have = available_memory()
    if have is None or need <= have:
        return
    streams = len(plan.get("streams") or [])
    raise UsageError(
        f"{streams:,} stream(s) with their queue depths and IO sizes need about "
        f"{format_size(need)} of memory ({format_size(STREAM_MEMORY)} per stream plus a buffer "
        f"per IO in flight), but this machine has {format_size(have)} available: run fewer "
        "streams, lower qd or bs, or spread them over hosts with --cluster."
    )
