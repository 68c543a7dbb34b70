"""`tilemark run --tiles N`: N tiles of emulated applications, judged per application."""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console

from tilemark import cluster
from tilemark.commands import held
from tilemark.errors import UsageError
from tilemark.options.typed import Options
from tilemark.run.outcome import RunOutcome
from tilemark.run.tiles import (
    MAX_TILES,
    TileRunSettings,
    inspect_tile_targets,
    load_tile_spec,
    run_tiles,
    tile_settings,
    tiles_plan,
)
from tilemark.run.where import Targets
from tilemark.telemetry import prometheus
from tilemark.workload.apps import TileSpec


@dataclass(frozen=True)
class TilesSetup:
    """N tiles checked and compiled on their inspected targets: nothing written yet."""

    tile: TileSpec
    tiles: int
    settings: TileRunSettings
    infos: Targets


def setup(opts: Options, *, until_steady: bool = True) -> TilesSetup:
    """The tile, its count and settings, its targets inspected and the whole plan compiled (no
    IO yet); `until_steady` False refuses --until-steady."""
    tiles = opts.tile.tiles
    if tiles is None or not 1 <= tiles <= MAX_TILES:
        raise UsageError(f"--tiles must be from 1 to {MAX_TILES}, got {tiles}.")
    tile = load_tile_spec(opts.tile.tile, list(opts.tile.set))
    settings = tile_settings(
        opts, extend_by_default=False, until_steady=until_steady, block=tile.block
    )
    infos = inspect_tile_targets(tile, settings, tiles, **opts.safety.inspect_kwargs())
    tiles_plan(tile, tiles, settings, infos, max_tiles=tiles)  # validates the whole plan
    return TilesSetup(tile, tiles, settings, infos)


def run(opts: Options, *, argv: list[str], console: Console) -> tuple[TilesSetup, RunOutcome]:
    """Validate, lock and prepare, run N tiles and store the run; the setup (what ran) and the
    stored run, whose summary has an `applications` section with the QoS verdicts."""
    with cluster.opened(opts.cluster, force=opts.safety.force):
        ready = setup(opts)
        prometheus.from_options(opts.output, console)
        with held(ready.infos, argv, console):
            outcome = run_tiles(
                ready.tile,
                ready.tiles,
                ready.settings,
                ready.infos,
                max_tiles=ready.tiles,
                results=opts.output.results,
                argv=argv,
                console=console,
                label=opts.output.label,
            )
    return ready, outcome
