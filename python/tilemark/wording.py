"""Small words every printed line needs right: counts with their noun ("1 tile", "2 tiles"),
signed changes that never read "-0.0%", what a run ran when its workload has no name, and how
two definitions differ (field by field, never a Python dict cut off in the middle)."""

from __future__ import annotations

from typing import Any

# The names a workload gets when it was not named: built from command-line flags, or the
# built-in default.
UNNAMED_WORKLOADS = ("flags", "default")


def counted(n: int | float, noun: str, plural: str | None = None) -> str:
    """'1 tile', '2 tiles', '1,200 streams'; `plural` for nouns that do not take an s."""
    many = plural or f"{noun}s"
    shown = f"{n:,}" if isinstance(n, int) or float(n).is_integer() else f"{n:g}"
    if isinstance(n, float) and n.is_integer():
        shown = f"{int(n):,}"
    return f"{shown} {noun if n == 1 else many}"


def signed_pct(value: float, digits: int = 1) -> str:
    """'+12.9%', '-3.0%', '+0.0%': a change too small to show has no sign of its own."""
    text = f"{value:+.{digits}f}"
    if float(text) == 0:
        text = f"+{0:.{digits}f}"
    return f"{text}%"


def workload_title(workload: dict[str, Any] | None, streams: list[dict[str, Any]]) -> str:
    """A headline's name for what ran: the workload's own name, or for one given by flags its
    stream ('randread: 100% read, 4 KiB uniform, QD 4'), never the bare word "flags"."""
    from tilemark.units import format_size

    name = (workload or {}).get("name")
    if name and name not in UNNAMED_WORKLOADS:
        return str(name)
    if len(streams) == 1:
        s = streams[0]
        sizes = s.get("sizes") or []
        size = "/".join(format_size(sz) for sz, _ in sizes) or "?"
        pattern = (s.get("pattern") or {}).get("kind", "")
        read = s.get("read_pct", 0)
        read = f"{read:g}" if isinstance(read, float) else str(read)
        return f"{s.get('name')}: {read}% read, {size} {pattern}, QD {s.get('qd')}".replace(
            "  ", " "
        )
    shown = name if name and name != "flags" else "workload"
    if streams:
        return f"{shown} ({counted(len(streams), 'stream')})"
    return shown


def value_differences(name: str, a: Any, b: Any) -> list[str]:
    """Where two values of a definition differ, field by field, in plain words: 'axes.bs
    (4096, 65536 vs 4096)', never a Python dict cut off in the middle."""
    if isinstance(a, dict) and isinstance(b, dict):
        return [
            d
            for k in [*a, *(k for k in b if k not in a)]
            if a.get(k) != b.get(k)
            for d in value_differences(f"{name}.{k}", a.get(k), b.get(k))
        ]
    return [f"{name} ({_plain(a)} vs {_plain(b)})"]


def _plain(value: Any) -> str:
    """A definition's value as a person writes it: 4096, 1, 2, 4, none, uniform."""
    if value is None:
        return "none"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, list | tuple):
        shown = ", ".join(_plain(v) for v in value[:8])
        return shown + (f" and {len(value) - 8} more" if len(value) > 8 else "")
    if isinstance(value, dict):
        return ", ".join(f"{k} {_plain(v)}" for k, v in list(value.items())[:6])
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."
