"""Parsers of the stream keys for fio's block sequences, strided zones, write sizes and
priorities by size (`pattern = "sequence:..."`, `zones`, `write_bs`, `priority_by_size`;
docs/options.md). The engine side is crates/engine/src/fiopatterns.rs."""

from __future__ import annotations

from tilemark.errors import UsageError
from tilemark.options.parsers import parse_priority, parse_size, shown

# linux/ioprio.h: a hint has 10 bits (IOPRIO_HINT_NR_BITS).
MAX_HINT = 1023

PriorityBySize = tuple[tuple[str, int, float, str, int, int], ...]


def sequence_plan(pattern: str) -> dict[str, object]:
    """The plan pattern of a normalized sequence."""
    body = pattern.removeprefix("sequence:")
    stride = body.endswith(":stride")
    blocks = [int(b) for b in body.removesuffix(":stride").split(",")]
    return {"kind": "sequence", "blocks": blocks, "stride": stride}


def parse_zones(value: object, label: str) -> tuple[int, int, int]:
    """SIZE:SKIP or SIZE:RANGE:SKIP -> (size, range, skip): SIZE bytes of sequential IO in a
    zone of RANGE bytes (default SIZE), then on RANGE + SKIP to the next (fio's strided
    zones)."""
    text = value.strip().lower() if isinstance(value, str) else ""
    parts = text.split(":")
    sizes: list[int] = []
    if len(parts) in (2, 3):
        try:
            sizes = [parse_size(p, label) if p != "0" else 0 for p in parts]
        except UsageError:
            sizes = []
    if not sizes or sizes[0] <= 0 or sizes[-2] <= 0:
        raise UsageError(
            f"{label} must be SIZE:SKIP or SIZE:RANGE:SKIP (SIZE bytes of sequential IO in a "
            f"zone of RANGE bytes, then RANGE + SKIP on to the next: 256m:2g), got "
            f"{shown(value)}."
        )
    if len(sizes) == 2:
        return sizes[0], sizes[0], sizes[1]
    return sizes[0], sizes[1], sizes[2]


def parse_priority_by_size(value: object, label: str) -> PriorityBySize:
    """OP:SIZE:PCT:PRIORITY[+HINT],... (read:64k:25:rt/1, write:1m:10:be/0+1): that share of
    the direction's IOs of that size at that priority (and hint), the rest at the stream's."""
    text = value.strip().lower() if isinstance(value, str) else ""
    out = []
    totals: dict[tuple[str, int], float] = {}
    for entry in [e.strip() for e in text.split(",")] if text else [""]:
        parts = entry.split(":")
        try:
            op, size_text, pct_text, prio_text = parts
            size = parse_size(size_text, label)
            pct = float(pct_text.rstrip("%"))
            prio, _, hint_text = prio_text.partition("+")
            klass, level = parse_priority(prio, label)
            hint = int(hint_text) if hint_text else 0
        except (ValueError, UsageError):
            op, pct, hint, size, klass, level = "", -1.0, -1, 0, "", 0
        totals[(op, size)] = totals.get((op, size), 0.0) + pct
        if op not in ("read", "write") or not 0 < pct <= 100 or not 0 <= hint <= MAX_HINT:
            raise UsageError(
                f"{label} must be OP:SIZE:PCT:CLASS[/LEVEL][+HINT] entries separated by commas "
                f"(OP read or write, PCT above 0 and at most 100, HINT 0 to {MAX_HINT}: "
                f"read:64k:25:rt/1,read:64k:75:idle), got {shown(value)}."
            )
        if totals[(op, size)] > 100 + 1e-9:
            raise UsageError(
                f"{label} gives {op}s of {size_text} more than 100% in all, got {shown(value)}."
            )
        out.append((op, size, pct, klass, level, hint))
    return tuple(out)
