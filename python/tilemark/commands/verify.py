"""`tilemark verify RUN_OR_TARGET`: the passes over a run's or a target's data area, one after
another, each stored with the run it checked; a signal stops the pass under way in order (what
it read is judged and stored, marked interrupted) and no further pass starts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tilemark.errors import UsageError
from tilemark.targets import verification

MAX_THREADS = 64


@dataclass(frozen=True)
class VerifyOutcome:
    """Every pass that ran ("run ID" or "target PATH", its result) and the exit status: 0,
    1 when something was found or a pass did not finish, 128 + signal when interrupted."""

    passes: tuple[tuple[str, dict[str, Any]], ...]
    exit_status: int


def run(
    run_or_target: str,
    *,
    results: Path,
    threads: int,
    note: Callable[[str], None],
    finished: Callable[[str, dict[str, Any]], None],
) -> VerifyOutcome:
    """Plan and run the passes; `note` gets what each pass's plan says first, `finished` each
    pass's result as it ends."""
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"--threads must be from 1 to {MAX_THREADS}, got {threads}.")
    passes = verification.plan_pass(run_or_target, results, threads)
    done: list[tuple[str, dict[str, Any]]] = []
    status = 0
    for p in passes:
        for text in p.notes or []:
            note(text)
        result = verification.execute(p, verification.progress_printer(p.path))
        done.append((p.what, result))
        finished(p.what, result)
        if result.get("exit_status") is not None:
            status = int(result["exit_status"])
            break
        if result["total"] > 0 or result["io_errors"] or not result["complete"]:
            status = 1
        if not result["complete"]:
            break
    return VerifyOutcome(tuple(done), status)
