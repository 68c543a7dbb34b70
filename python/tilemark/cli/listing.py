"""What listing commands (`runs`, `studies`) share, light enough for them to start at once."""

from __future__ import annotations

import json
from typing import Any

import typer


def listed_plainly(rows: list[dict[str, Any]], json_out: bool, nothing: str) -> bool:
    """The JSON list of a listing command (`runs`, `studies`), or its sentence for an empty
    list; True when printed, False when the caller prints its table."""
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
        return True
    if not rows:
        typer.echo(nothing)
        return True
    return False
