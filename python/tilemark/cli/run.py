"""`tilemark run`: a workload (TOML file, fio-like flags for one stream, or --default), or
`--tiles N` tiles of emulated applications.

Everything the user typed is validated before any IO (UsageError, exit 2). Interrupting a run
(Ctrl-C, SIGTERM) stops the engine in order: the intervals measured so far are written and the
run is marked incomplete, and the exit status is 128 + the signal number. A tile run whose QoS
fails exits 3.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from tilemark.api import execute_workload
from tilemark.cli.common import (
    EXIT_QOS,
    argv_of,
    consoles,
    print_run,
    qos_lines,
    results_path,
    verdict_line,
    write_json,
)
from tilemark.cli.params import argument, check_mode, table_command
from tilemark.errors import UsageError
from tilemark.options import RUN, TILES, Option, label_of, safety
from tilemark.run.runner import prepare
from tilemark.run.tiles import (
    MAX_TILES,
    applications_table,
    inspect_tile_targets,
    load_tile_spec,
    run_tiles,
    tile_settings,
    tiles_plan,
)
from tilemark.run.where import Targets, lock
from tilemark.telemetry import prometheus as metrics


def _clash(mode: str) -> Any:
    def sentence(o: Option) -> str:
        if mode == RUN:
            return f"{o.flag} applies to tile runs; add --tiles N."
        return (
            f"--tiles runs emulated applications and cannot be combined with {o.flag}; "
            "change applications with --set or a --tile file."
        )

    return sentence


def _run(ctx: typer.Context, values: dict[str, Any]) -> None:
    workload_file = values.pop("workload_file")
    mode = run_mode(values, workload_file, {RUN, TILES})
    status = (
        run_tiles_command(ctx, values)
        if mode == TILES
        else run_workload(ctx, values, workload_file)
    )
    if status:
        raise typer.Exit(status)


def run_mode(values: dict[str, Any], workload_file: Path | None, command_modes: set[str]) -> str:
    """RUN or TILES, from --tiles; refuses options that do not apply to the mode chosen."""
    mode = TILES if values.get("tile_count") is not None else RUN
    if mode == TILES and workload_file is not None:
        raise UsageError(_clash(TILES)(Option("workload", "run", "", flag=str(workload_file))))
    check_mode(values, mode, command_modes, _clash(mode))
    return mode


def tiles_setup(
    values: dict[str, Any], *, until_steady: bool = True
) -> tuple[Any, int, Any, Targets]:
    """(tile, count, settings, targets) of `--tiles N`, checked and compiled (no IO yet);
    `until_steady` False refuses --until-steady."""
    tiles = values["tile_count"]
    if not 1 <= tiles <= MAX_TILES:
        raise UsageError(f"--tiles must be from 1 to {MAX_TILES}, got {tiles}.")
    tile = load_tile_spec(values.get("tile_file"), values.get("sets"))
    settings = tile_settings(values, extend_by_default=False, until_steady=until_steady)
    infos = inspect_tile_targets(tile, settings, tiles, **safety(values))
    # Validate the whole plan before any IO.
    tiles_plan(tile, tiles, settings, infos, max_tiles=tiles)
    return tile, tiles, settings, infos


def run_workload(ctx: typer.Context, values: dict[str, Any], workload_file: Path | None) -> int:
    """`tilemark run` with a workload: inspect and prepare the target, run, store, print."""
    out, err = consoles(bool(values.get("json_out")))
    outcome = execute_workload(values, workload_file, argv=argv_of(ctx), console=err)
    if isinstance(outcome, int):
        return outcome
    if values.get("json_out"):
        write_json(outcome, {"summary": outcome.summary})
    print_run(outcome, out, err)
    state = outcome.summary.get("steady_state")
    if state is not None:
        out.print(f"steady state: {state['verdict']}", markup=False, soft_wrap=True)
    return outcome.exit_status or 0


def run_tiles_command(ctx: typer.Context, values: dict[str, Any]) -> int:
    """`tilemark run --tiles N`: one tile count, per-application results."""
    tile, tiles, settings, infos = tiles_setup(values)
    label = label_of(values)
    metrics.from_values(values)
    json_out = bool(values.get("json_out"))
    out, err = consoles(json_out)
    argv = argv_of(ctx)
    with lock(infos, argv):
        if not prepare(infos, err):
            return 130
        outcome = run_tiles(
            tile,
            tiles,
            settings,
            infos,
            max_tiles=tiles,
            results=results_path(values),
            argv=argv,
            console=err,
            label=label,
        )
    apps = outcome.summary["applications"]
    if json_out:
        write_json(outcome, {"summary": _without_layout(outcome.summary)})
    print_run(outcome, out, err)
    out.print(applications_table(apps, f"{tiles} tile(s) of {tile.name}: applications"))
    out.print(verdict_line(apps), markup=False)
    for line in qos_lines(apps):
        out.print(line, markup=False)
    state = outcome.summary.get("steady_state")
    if state is not None:
        out.print(f"steady state: {state['verdict']}", markup=False, soft_wrap=True)
    if outcome.exit_status is not None:
        return outcome.exit_status
    return 0 if apps["passed"] else EXIT_QOS


def _without_layout(summary: dict) -> dict:
    apps = {k: v for k, v in summary["applications"].items() if k != "layout"}
    apps["instances"] = [{k: v for k, v in i.items() if k != "verdicts"} for i in apps["instances"]]
    return {**summary, "applications": apps}


WORKLOAD_ARG = argument(
    "workload_file",
    "WORKLOAD.toml",
    "Workload file: run-wide keys, an optional [defaults] table and [[stream]] tables; or a "
    "fio job file (JOB.fio, translated as `tilemark import-fio` does). Without it, the flags "
    "describe one stream.",
)

run = table_command(
    "run",
    "Run a workload: a TOML file, fio-like flags for one stream, --default, or --tiles N.",
    {RUN, TILES},
    _run,
    [WORKLOAD_ARG],
)
