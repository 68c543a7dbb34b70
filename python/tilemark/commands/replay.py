"""`tilemark replay`: block traces replayed against a target, stored as a run (kind "replay").

Everything is checked and the IO lists written to a staging directory before any IO
(trace/replay.py); then the target is locked and prepared, the lists move into the run
directory as the run starts, and the run is stored with its `replay` section.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
from pathlib import Path

from rich.console import Console

from tilemark.commands import held
from tilemark.run.runner import run_plan
from tilemark.trace.replay import (
    ReplayOptions,
    ReplayResult,
    analyze,
    compile_replay,
    move_lists,
    note,
)


def run(options: ReplayOptions, *, argv: list[str], console: Console) -> ReplayResult:
    """Check, compile and run a replay and store it as a run; Interrupted when Ctrl-C stops
    the target's preparation. Bad input is a UsageError before any IO, with nothing written."""
    results = Path(options.results)
    made_results = not results.exists()
    staging = results / f".replay-{os.getpid()}-{secrets.token_hex(3)}"
    try:
        compiled = compile_replay(options, staging)
        with held(compiled.infos, argv, console):
            outcome = run_plan(
                compiled.workload,
                compiled.infos,
                compiled.plan,
                results=results,
                argv=argv,
                console=console,
                kind="replay",
                analyze=lambda plan, result, summary: analyze(compiled, result, summary),
                note=note(compiled),
                label=options.label,
                before_start=lambda run_dir, plan: move_lists(compiled, run_dir, plan),
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        if made_results:
            with contextlib.suppress(OSError):
                results.rmdir()  # only when nothing was stored in it
    return ReplayResult(outcome, outcome.summary.get("replay") or {})
