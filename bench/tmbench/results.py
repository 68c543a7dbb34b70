"""Writing a benchmark's results: a JSON document (every number, the command, the machine notes)
and a Markdown report beside it, under one standard name, never replacing an earlier result.

The name is `<YYYY-MM-DD>-<HHMMSS>-<host>-<case>` (local time): sorted by name the files are
in the order they were made, and bench/index.py reads the date, time and host from it."""

from __future__ import annotations

import json
import re
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

CASE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def results_stem(out: Path, case: str, when: datetime | None = None) -> Path:
    """out/<date>-<time>-<host>-<case>, with -2, -3 ... after the case when that name is taken
    (two results written within one second)."""
    if not CASE.fullmatch(case):
        raise ValueError(f"results case {case!r}: letters, digits, '.', '_' and '-' only")
    when = when or datetime.now()
    stem = f"{when:%Y-%m-%d-%H%M%S}-{socket.gethostname()}-{case}"
    name, n = stem, 1
    while (out / f"{name}.json").exists() or (out / f"{name}.md").exists():
        n += 1
        name = f"{stem}-{n}"
    return out / name


def write_results(
    out: Path,
    case: str,
    doc: dict[str, Any],
    markdown: str,
    when: datetime | None = None,
    indent: int = 1,
) -> tuple[Path, Path]:
    """Write doc as <stem>.json and markdown as <stem>.md under out; return both paths. doc must
    carry the machine notes (`machine`): a figure without them cannot be read later."""
    if "machine" not in doc:
        raise ValueError("a results document carries its machine notes under 'machine'")
    out.mkdir(parents=True, exist_ok=True)
    stem = results_stem(out, case, when)
    # Not with_suffix: a host name with dots would lose its last part.
    json_path, md_path = stem.parent / f"{stem.name}.json", stem.parent / f"{stem.name}.md"
    json_path.write_text(json.dumps(doc, indent=indent, default=str) + "\n")
    md_path.write_text(markdown)
    return json_path, md_path
