"""Dataclasses to plain JSON-able data, fast.

`dataclasses.asdict` deep-copies every leaf; the workload spec's leaves are plain values
already (numbers, strings, None), and its copies took 0.75 s for a workload of 10,000 streams
(0.35 s this way, the same document).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def plain(value: Any) -> Any:
    """`value` with every dataclass made a dict (lists, tuples and dicts walked, leaves as
    they are), as dataclasses.asdict makes it."""
    kind = type(value)
    names = _FIELD_NAMES.get(kind)
    if names is None and hasattr(kind, "__dataclass_fields__"):
        names = _FIELD_NAMES[kind] = tuple(f.name for f in fields(value))
    if names is not None:
        return {n: plain(getattr(value, n)) for n in names}
    if kind is list or kind is tuple:
        return kind(plain(v) for v in value)
    if kind is dict:
        return {k: plain(v) for k, v in value.items()}
    return value
