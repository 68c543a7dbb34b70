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

from tilemark.cli.common import (
    EXIT_QOS,
    argv_of,
    consoles,
    print_run,
    qos_lines,
    verdict_line,
    write_json,
)
from tilemark.cli.params import argument, check_mode, table_command
from tilemark.console import say
from tilemark.errors import UsageError
from tilemark.interrupts import Interrupted
from tilemark.options import RUN, TILES, Option
from tilemark.options.typed import Options
from tilemark.wording import counted

# The commands (engine, store: pyarrow, DuckDB) load when a run starts, after the options are
# checked: bad input is refused without them.


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
    if workload_file is not None and workload_file.suffix == ".fio":
        from tilemark.cli.files import run_fio_file_jobs

        if run_fio_file_jobs(workload_file, values):  # fio's file and directory engines
            return
    mode = run_mode(values, workload_file, {RUN, TILES})
    opts = Options.from_values(values, mode)
    try:
        status = (
            run_tiles_command(ctx, opts)
            if mode == TILES
            else run_workload(ctx, opts, workload_file)
        )
    except Interrupted as e:
        raise typer.Exit(e.status) from None
    if status:
        raise typer.Exit(status)


def run_mode(values: dict[str, Any], workload_file: Path | None, command_modes: set[str]) -> str:
    """RUN or TILES, from --tiles; refuses options that do not apply to the mode chosen."""
    mode = TILES if values.get("tile_count") is not None else RUN
    if mode == TILES and workload_file is not None:
        raise UsageError(_clash(TILES)(Option("workload", "run", "", flag=str(workload_file))))
    check_mode(values, mode, command_modes, _clash(mode))
    return mode


def run_workload(ctx: typer.Context, opts: Options, workload_file: Path | None) -> int:
    """`tilemark run` with a workload: run it (commands/workload.py) and print."""
    from tilemark.commands import workload as workload_command

    out, err = consoles(opts.output.json)
    outcome = workload_command.run(opts, workload_file, argv=argv_of(ctx), console=err)
    if opts.output.json:
        write_json(outcome, {"summary": outcome.summary})
    print_run(outcome, out, err)
    state = outcome.summary.get("steady_state")
    if state is not None:
        say(out, f"steady state: {state['verdict']}")
    return outcome.exit_status or 0


def run_tiles_command(ctx: typer.Context, opts: Options) -> int:
    """`tilemark run --tiles N`: run them (commands/tiles.py) and print per application."""
    from tilemark.commands import tiles as tiles_command
    from tilemark.run.tiles import applications_table

    out, err = consoles(opts.output.json)
    ready, outcome = tiles_command.run(opts, argv=argv_of(ctx), console=err)
    apps = outcome.summary["applications"]
    if opts.output.json:
        write_json(outcome, {"summary": _without_layout(outcome.summary)})
    print_run(outcome, out, err)
    title = f"{counted(ready.tiles, 'tile')} of {ready.tile.name}: applications"
    out.print(applications_table(apps, title))
    out.print(verdict_line(apps), markup=False)
    for line in qos_lines(apps):
        out.print(line, markup=False)
    state = outcome.summary.get("steady_state")
    if state is not None:
        say(out, f"steady state: {state['verdict']}")
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
