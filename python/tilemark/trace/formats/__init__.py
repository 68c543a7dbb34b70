"""Import formats: one module each, all with the same small interface.

A format module has NAME, TITLE (what it is), EXAMPLE (a line of it), NOTES or per-reader
notes, ABSOLUTE_TIME (its times are since the Unix epoch), `detect(lines) -> bool` over the
first non-blank lines of a file, and `reader(path, display, device) -> Reader`, whose
`batches()` yields base.RAW_SCHEMA record batches. docs/traces.md describes each format with
its source.
"""

from __future__ import annotations

from types import ModuleType

from tilemark.trace.formats import alibaba, blkparse, iolog, msr, tencent

FORMATS: dict[str, ModuleType] = {m.NAME: m for m in (blkparse, iolog, msr, alibaba, tencent)}


def names() -> list[str]:
    """The format names `--format` takes."""
    return list(FORMATS)


def detect(lines: list[str]) -> list[str]:
    """The formats whose rules the sample lines follow (one when the format is clear)."""
    return [name for name, module in FORMATS.items() if module.detect(lines)]
