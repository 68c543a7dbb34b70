"""What a finished run hands back to the command that ran it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark import engine


@dataclass
class RunOutcome:
    """A stored run: where it is, what the engine measured, how it ended."""

    run_id: str
    run_dir: Path
    compiled: engine.Plan
    result: engine.Result
    summary: dict[str, Any]
    complete: bool
    exit_status: int | None  # 128 + signal when interrupted, 1 when the results failed
    catalog_error: str | None
    ended_by: str | None = None  # why the run ended before its plan did ("decided")
    status: str = "complete"  # as stored in run.json (docs/results-schema.md, Statuses)
    error: str | None = None  # why the run is stored as failed
    notes_shown: tuple[str, ...] = ()  # notes printed as the run started: not repeated after it
