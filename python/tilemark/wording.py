"""Small words every printed line needs right: counts with their noun ("1 tile", "2 tiles")
and signed changes that never read "-0.0%"."""

from __future__ import annotations


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
