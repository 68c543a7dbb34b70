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

from tilemark import fio, plan, targets
from tilemark.cli.common import (
    DEFAULT_TARGET,
    EXIT_QOS,
    argv_of,
    consoles,
    label_of,
    print_run,
    qos_lines,
    results_path,
    safety,
    verdict_line,
    write_json,
)
from tilemark.cli.params import argument, check_mode, scoped, table_command
from tilemark.errors import UsageError
from tilemark.options import RUN, TILES, Option, option
from tilemark.runner import inspect_and_compile, prepare, run_plan
from tilemark.tilerun import (
    MAX_TILES,
    applications_table,
    inspect_tile_target,
    load_tile_spec,
    run_tiles,
    tile_settings,
    tile_workload,
)
from tilemark.units import parse_size


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def build_workload(
    workload_file: Path | None,
    run_flags: dict[str, Any],
    stream_flags: dict[str, Any],
    *,
    use_default: bool,
    overridden: list[str] | None = None,
    notes: list[str] | None = None,
) -> plan.Workload:
    """The validated workload from a TOML file, the built-in default, or flags alone.
    `overridden` receives 'flag value overrides key = value' for flags that replace values of
    the workload file; `notes` what the translation of a fio job file (JOB.fio) changed."""
    flag_keys = frozenset(run_flags) | frozenset(stream_flags)
    if use_default:
        if workload_file is not None:
            raise UsageError(
                "--default runs the built-in workload and cannot be combined with a workload "
                f"file ({workload_file}); pass one or the other."
            )
        if stream_flags:
            key = next(iter(stream_flags))
            raise UsageError(
                f"{_flag(key)} sets a single stream and cannot be combined with --default, "
                "which runs several; write a workload file to change its streams."
            )
        target = run_flags.get("target", DEFAULT_TARGET)
        if "size" in run_flags:
            size = parse_size(run_flags["size"], "--size")
        else:
            size = targets.default_size(target)
        doc = plan.default_workload_doc(target, size)
        doc.update({key: value for key, value in run_flags.items() if key != "size"})
        return plan.parse_workload(doc, source="default", flag_keys=flag_keys)

    if workload_file is not None:
        if workload_file.suffix == ".fio":
            translation = fio.translate(workload_file)
            doc = translation.doc
            if notes is not None:
                notes += translation.notes
        else:
            doc = plan.load_toml(workload_file)
        if overridden is not None:
            overridden += _overrides(doc, run_flags)
        doc.update(run_flags)
        if stream_flags:
            tables = doc.get("stream")
            if not (isinstance(tables, list) and len(tables) == 1 and isinstance(tables[0], dict)):
                count = len(tables) if isinstance(tables, list) else 0
                key = next(iter(stream_flags))
                raise UsageError(
                    f"{_flag(key)} sets a single stream, but {workload_file} has {count} "
                    "streams; set it in the file ([defaults] applies to every stream)."
                )
            if overridden is not None:
                overridden += _overrides(tables[0], stream_flags)
            tables[0].update(stream_flags)
        return plan.parse_workload(doc, source=str(workload_file), flag_keys=flag_keys)

    doc = {**run_flags, "stream": [dict(stream_flags)]}
    return plan.parse_workload(doc, source="flags", flag_keys=flag_keys)


def _overrides(table: dict[str, Any], flags: dict[str, Any]) -> list[str]:
    return [
        f"{_flag(k)} {v} overrides {k} = {table[k]!r}"
        for k, v in flags.items()
        if k in table and str(table[k]) != str(v)
    ]


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


def workload_setup(
    values: dict[str, Any], workload_file: Path | None
) -> tuple[plan.Workload, targets.TargetInfo, dict[str, Any], list[str], list[str]]:
    """The workload of a file, --default or the flags; its target inspected and its plan
    compiled (no IO yet); which flags overrode values of the file; notes on the workload."""
    given = scoped(values, "run", RUN)
    run_flags = {k: v for k, v in given.items() if option("run", k).toml}
    if values.get("buffered"):
        run_flags["direct"] = False
    stream_flags = scoped(values, "stream", RUN)
    overridden: list[str] = []
    notes: list[str] = []
    workload = build_workload(
        workload_file,
        run_flags,
        stream_flags,
        use_default=bool(values.get("use_default")),
        overridden=overridden,
        notes=notes,
    )
    info, compiled = inspect_and_compile(workload, **safety(values))
    return workload, info, compiled, overridden, notes


def tiles_setup(values: dict[str, Any]) -> tuple[Any, int, Any, targets.TargetInfo]:
    """(tile, count, settings, target) of `--tiles N`, checked and compiled (no IO yet)."""
    tiles = values["tile_count"]
    if not 1 <= tiles <= MAX_TILES:
        raise UsageError(f"--tiles must be from 1 to {MAX_TILES}, got {tiles}.")
    tile = load_tile_spec(values.get("tile_file"), values.get("sets"))
    settings = tile_settings(values, extend_by_default=False)
    info = inspect_tile_target(tile, settings, tiles, **safety(values))
    # Validate the whole plan before any IO.
    tile_workload(tile, tiles, settings, max_tiles=tiles, dio_alignment=info.dio_alignment)
    return tile, tiles, settings, info


def run_workload(ctx: typer.Context, values: dict[str, Any], workload_file: Path | None) -> int:
    """`tilemark run` with a workload: inspect and prepare the target, run, store, print."""
    workload, info, compiled, overridden, notes = workload_setup(values, workload_file)
    label = label_of(values)
    out, err = consoles(bool(values.get("json_out")))
    for note in notes:
        err.print(f"note: {note}", markup=False, soft_wrap=True)
    if overridden:
        err.print(f"note: {'; '.join(overridden)} in {workload_file}", markup=False, soft_wrap=True)
    argv = argv_of(ctx)
    with targets.lock_target(info, argv):
        if not prepare(info, err):
            return 130
        outcome = run_plan(
            workload,
            info,
            compiled,
            results=results_path(values),
            argv=argv,
            console=err,
            label=label,
        )
    if values.get("json_out"):
        write_json(outcome, {"summary": outcome.summary})
    print_run(outcome, out, err)
    return outcome.exit_status or 0


def run_tiles_command(ctx: typer.Context, values: dict[str, Any]) -> int:
    """`tilemark run --tiles N`: one tile count, per-application results."""
    tile, tiles, settings, info = tiles_setup(values)
    label = label_of(values)
    json_out = bool(values.get("json_out"))
    out, err = consoles(json_out)
    argv = argv_of(ctx)
    with targets.lock_target(info, argv):
        if not prepare(info, err):
            return 130
        outcome = run_tiles(
            tile,
            tiles,
            settings,
            info,
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
