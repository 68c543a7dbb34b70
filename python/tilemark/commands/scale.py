"""`tilemark scale`: add tiles (or raise one application's knob) until an application's QoS
fails. Validates everything before any IO, locks, prepares and settles the targets, then runs
the study on the framework (study/base.py, study/scale.py)."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from tilemark import cluster
from tilemark.commands import Interrupted
from tilemark.errors import UsageError
from tilemark.options import option
from tilemark.options.typed import Options
from tilemark.run.runner import prepare
from tilemark.run.tiles import inspect_tile_targets, load_tile_spec, tile_settings
from tilemark.run.where import RemoteTargets, Targets, lock
from tilemark.study.base import StudyEvents, StudyOutcome, StudyRecord, run_study
from tilemark.study.scale import (
    DEFAULT_COUNTS,
    TileStepRunner,
    TileStudySetup,
    knob_setup,
    parse_tile_counts,
    tile_count_setup,
)
from tilemark.study.settle import settle
from tilemark.telemetry import prometheus


def setup(opts: Options, tile_file: Path | None) -> TileStudySetup:
    """The study (tile counts or a knob search), checked and compiled (no IO yet)."""
    study = opts.study
    if study.knob is None:
        for key in ("knob_range", "knob_precision"):
            if getattr(study, key) is not None:
                raise UsageError(
                    f"{option('study', key).flag} applies to a knob search; add --knob."
                )
    counts = parse_tile_counts(study.counts or (DEFAULT_COUNTS if not study.knob else "1"))
    tile_path = str(tile_file) if tile_file else None
    sets = list(opts.tile.set)
    tile = load_tile_spec(tile_path, sets)
    settings = tile_settings(opts, extend_by_default=True, block=tile.block)
    if study.knob is None:
        return tile_count_setup(
            tile,
            settings,
            counts,
            search=study.search,
            confirm=study.confirm if study.confirm is not None else 1,
        )
    return knob_setup(
        lambda extra: load_tile_spec(tile_path, sets + extra),
        settings,
        counts,
        knob=study.knob,
        knob_range=study.knob_range,
        precision_pct=study.knob_precision if study.knob_precision is not None else 5.0,
    )


def run(
    opts: Options,
    tile_file: Path | None,
    *,
    argv: list[str],
    console: Console,
    events: StudyEvents | None,
) -> tuple[TileStudySetup, StudyOutcome]:
    """`tilemark scale`: validate everything before any IO, lock the targets, and run the
    study (on --cluster's hosts when given). Returns the study's setup and its outcome;
    Interrupted when Ctrl-C comes before the first step."""
    study = opts.study
    confirm_runs = study.confirm_runs if study.confirm_runs is not None else 1
    repeat = study.repeat if study.repeat is not None else 1
    settle_max = (study.settle_max or 60.0) if study.settle else None
    with cluster.opened(opts.cluster, force=opts.safety.force):
        ready = setup(opts, tile_file)
        infos = inspect_tile_targets(
            ready.tile, ready.settings, ready.max_tiles, **opts.safety.inspect_kwargs()
        )
        ready.check_compiles(infos)
        prometheus.from_options(opts.output, console)
        with lock(infos, argv):
            outcome = run_tile_study(
                ready,
                infos,
                results=opts.output.results,
                argv=argv,
                console=console,
                confirm_runs=confirm_runs,
                repeat=repeat,
                settle_max_s=settle_max,
                events=events,
                label=opts.output.label,
            )
    return ready, outcome


def run_tile_study(
    setup: TileStudySetup,
    infos: Targets,
    *,
    results: Path,
    argv: list[str],
    console: Console,
    confirm_runs: int,
    repeat: int,
    settle_max_s: float | None,
    events: StudyEvents | None = None,
    label: str | None = None,
) -> StudyOutcome:
    """Prepare the targets, settle them after a fill (unless `settle_max_s` is None), and run
    the study; Interrupted when Ctrl-C comes before the first step."""
    filling = any(i.will_fill for i in infos)
    prepare(infos, console)
    settling = None
    if isinstance(infos, RemoteTargets) and filling and settle_max_s is not None:
        console.print(
            "note: --settle probes the targets of one host; a study across hosts starts without it",
            markup=False,
        )
    elif filling and settle_max_s is not None:
        settling = settle(
            infos, backend=setup.settings.backend, max_s=settle_max_s, console=console
        )
        if settling.interrupted is not None:
            raise Interrupted(settling.interrupted)
    runner = TileStepRunner(
        setup.tile_of,
        setup.settings,
        infos,
        max_tiles=setup.max_tiles,
        results=results,
        argv=argv,
        console=console,
        label=label,
    )
    record = StudyRecord(results, {"kind": setup.make_study().kind, "argv": argv, "label": label})
    return run_study(
        setup.make_study,
        runner,
        record,
        confirm_runs=confirm_runs,
        repeat=repeat,
        events=events,
        extra=lambda: {
            "confirm_runs": confirm_runs,
            "repeat": repeat,
            "settle": settling.to_json() if settling else None,
        },
    )
