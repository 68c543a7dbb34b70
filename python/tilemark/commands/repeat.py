"""`tilemark repeat N`: the same workload (or N tiles) run N times, with a pause and a command
between repetitions, studied for decay (study/repeat.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from tilemark import cluster
from tilemark.commands import held
from tilemark.commands import tiles as tiles_command
from tilemark.commands import workload as workload_command
from tilemark.errors import UsageError
from tilemark.options import RUN
from tilemark.options.typed import Options
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import run_plan
from tilemark.run.tiles import run_tiles
from tilemark.study import StudyRecord, run_study, tile_definition
from tilemark.study.base import StudyEvents, StudyOutcome
from tilemark.study.repeat import RepeatStepRunner, RepeatStudy
from tilemark.targets import verification
from tilemark.telemetry import prometheus
from tilemark.wording import workload_title


def _refuse_remote_verify(verify: bool) -> None:
    session = cluster.current()
    if verify and session is not None and session.elsewhere():
        raise UsageError(
            "repeat --verify reads every repetition's data back from this machine, but "
            f"--cluster host {session.elsewhere()[0]} is another machine; repeat without "
            "--verify and run `tilemark verify PATH` on each host afterwards."
        )


def run(
    count: int,
    opts: Options,
    workload_file: Path | None,
    *,
    argv: list[str],
    console: Console,
    events: StudyEvents | None = None,
) -> StudyOutcome:
    """Run the workload (opts.mode RUN) or --tiles N (TILES) `count` times as a repeat study;
    every repetition is stored as a run, and what ran is kept however the study ends."""
    between = opts.study.between
    if between is not None and not between.strip():
        raise UsageError("--between must be a shell command, got an empty string.")
    pause_s = opts.study.pause or 0.0
    label = opts.output.label
    results = opts.output.results

    def run_label(n: int) -> str:
        return f"{label}, repetition {n}" if label else f"repetition {n}"

    def verified(outcome: RunOutcome) -> RunOutcome:
        # With verification (--verify or verify = true in the workload file), each repetition
        # ends with a pass over what it wrote (Jetstress).
        verifying = any(t.get("verify") for t in outcome.compiled["targets"])
        if verifying and outcome.exit_status is None:
            verification.after_run(outcome, console)
        return outcome

    with cluster.opened(opts.cluster, force=opts.safety.force):
        prometheus.from_options(opts.output, console)
        definition: dict[str, Any] = {"label": label, "pause_s": pause_s, "between": between}
        if opts.mode == RUN:
            ready = workload_command.setup(opts, workload_file)
            _refuse_remote_verify(ready.workload.verify)
            ready.print_notes(console, workload_file)
            infos = ready.infos
            definition.update(
                mode="workload",
                # A workload given by flags is named by its stream, not "flags".
                workload=workload_title(
                    {"name": ready.workload.name}, ready.compiled.get("streams") or []
                ),
                target=", ".join(i.path for i in infos),
            )

            def run_once(n: int) -> RunOutcome:
                return verified(
                    run_plan(
                        ready.workload,
                        ready.infos,
                        ready.compiled,
                        results=results,
                        argv=argv,
                        console=console,
                        kind="repeat-step",
                        label=run_label(n),
                    )
                )

        else:
            _refuse_remote_verify(opts.workload.verify)
            tiles = tiles_command.setup(opts, until_steady=False)
            infos = tiles.infos
            definition.update(
                mode="tiles", tiles=tiles.tiles, **tile_definition(tiles.tile, tiles.settings)
            )

            def run_once(n: int) -> RunOutcome:
                return verified(
                    run_tiles(
                        tiles.tile,
                        tiles.tiles,
                        tiles.settings,
                        tiles.infos,
                        max_tiles=tiles.tiles,
                        results=results,
                        argv=argv,
                        console=console,
                        kind="repeat-step",
                        label=run_label(n),
                    )
                )

        with held(infos, argv, console):
            runner = RepeatStepRunner(run_once, pause_s=pause_s, between=between, console=console)
            record = StudyRecord(results, {"kind": RepeatStudy.kind, "argv": argv, "label": label})
            return run_study(
                lambda: RepeatStudy(count, definition),
                runner,
                record,
                confirm_runs=0,
                events=events,
            )
