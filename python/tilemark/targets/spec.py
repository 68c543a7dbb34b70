"""A workload's targets as the user names them: a clean, named list (plan.py's Workload holds
it; a per-host copy of a workload replaces it).

Where the targets come from:

    target = "/data/tm.dat"                  # one target (the common case)
    target = ["/dev/loop1", "db=/dev/loop2"] # several; NAME=PATH names one
    [[target]]                               # or one table per target
    name = "db1"                             #   (default: from the path)
    path = "/dev/sdb"
    size = "10g"                             #   (default: the top-level size)

`--target` (repeatable) sets the same key, so it replaces a workload file's targets. A target's
default name is its file name without the extension (`/data/tm.dat` -> `tm`, `/dev/loop3` ->
`loop3`); names are unique within a workload.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.options import NAME_RE, option, parse_name, parse_path, shown

TARGET_KEYS = ("name", "path", "size")
# In a target's path: each tile's file of its own (workload/tilelayout.py expand_targets).
TILE_FIELD = "{tile}"


def per_tile(path: str) -> bool:
    """Whether a target's path gives each tile a file of its own."""
    return TILE_FIELD in path


def tile_path(path: str, k: int) -> str:
    """Tile k's file of a per-tile target's path."""
    return path.replace(TILE_FIELD, str(k))


@dataclass
class TargetSpec:
    """One target of a workload: its name, path and the size of its data area (None: the
    existing data area, or the device)."""

    name: str
    path: str
    size: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "size": self.size}


def default_name(path: str) -> str:
    """A target's name when none is given: its file name without the extension, in the
    characters a name may hold."""
    stem = Path(path.rstrip("/")).stem or Path(path).name
    return re.sub(r"[^A-Za-z0-9_.:+-]", "_", stem)[:64] or "target"


def split_name(text: str) -> tuple[str | None, str]:
    """'db=/dev/sdb' -> ('db', '/dev/sdb'); a path without a valid NAME= prefix is all path."""
    name, eq, path = text.partition("=")
    if eq and path and NAME_RE.fullmatch(name):
        return name, path
    return None, text


def parse_targets(value: object, size: int | None, *, flag: bool) -> list[TargetSpec]:
    """The targets of a workload document's `target` key: a path, a list of paths, or a list
    of [[target]] tables; `size` is the top-level size, the default of each target's. `flag`:
    the value came from --target (messages name the flag)."""
    label = "--target" if flag else "target"
    if isinstance(value, str):
        items: list[Any] = [value]
    elif isinstance(value, list) and value:
        items = value
    else:
        raise UsageError(
            f"{label} must be a path, a list of paths or [[target]] tables (name, path, size), "
            f"got {shown(value)}."
        )
    tables = [isinstance(i, dict) for i in items]
    if any(tables) and not all(tables):
        raise UsageError(
            f"{label} mixes paths and [[target]] tables; use one form for every target."
        )
    specs = [
        _from_table(item, k, size) if isinstance(item, dict) else _from_text(item, label, size)
        for k, item in enumerate(items)
    ]
    _check_unique(specs, label)
    return specs


def _from_text(item: object, label: str, size: int | None) -> TargetSpec:
    text = parse_path(item, label)
    name, path = split_name(text)
    return TargetSpec(name or default_name(path), path, size)


def _from_table(table: dict[str, Any], index: int, size: int | None) -> TargetSpec:
    named = table.get("name")
    where = f"[[target]] {index + 1}" + (f" ({named!r})" if isinstance(named, str) else "")
    unknown = sorted(set(table) - set(TARGET_KEYS))
    if unknown:
        raise UsageError(
            f"{where}: unknown key '{unknown[0]}'; allowed keys are {', '.join(TARGET_KEYS)}."
        )
    if table.get("path") is None:
        raise UsageError(
            f"{where} has no path; set path to a file (created if missing) or a block device."
        )
    path = parse_path(table["path"], f"{where}: path")
    name = parse_name(named, f"{where}: name") if named is not None else default_name(path)
    if "size" in table:
        size = option("run", "size").parse(table["size"], f"{where}: size")
    return TargetSpec(name, path, size)


def _check_unique(specs: list[TargetSpec], label: str) -> None:
    seen: dict[str, TargetSpec] = {}
    paths: dict[str, TargetSpec] = {}
    for t in specs:
        where = os.path.abspath(os.path.expanduser(t.path))
        if where in paths:
            raise UsageError(f"{label}: target {t.path} is given twice; name each target once.")
        paths[where] = t
        if t.name in seen:
            raise UsageError(
                f"{label}: targets {seen[t.name].path} and {t.path} are both named '{t.name}'; "
                "give them distinct names (NAME=PATH, or name = ... in [[target]])."
            )
        seen[t.name] = t
