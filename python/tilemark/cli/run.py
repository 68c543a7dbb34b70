"""`tilemark run`: validate a workload, prepare its target, run it, store and show the results.

Everything the user typed is validated before any IO (UsageError, exit 2). Interrupting a run
(Ctrl-C, SIGTERM) stops the engine in order: the intervals measured so far are written and the
run is marked incomplete, and the exit status is 128 + the signal number.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from tilemark import plan, targets
from tilemark.cli.options import CapacityOpt, QosIntervalOpt, SetOpt
from tilemark.errors import UsageError
from tilemark.live import results_table
from tilemark.runner import RunOutcome, inspect_and_compile, make_console, prepare, run_plan
from tilemark.units import parse_size

DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"
DEFAULT_RESULTS = Path("tilemark-results")


def _flag(key: str) -> str:
    return "--" + key.replace("_", "-")


def build_workload(
    workload_file: Path | None,
    run_flags: dict[str, Any],
    stream_flags: dict[str, Any],
    *,
    use_default: bool,
) -> plan.Workload:
    """The validated workload from a TOML file, the built-in default, or flags alone."""
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
        doc = plan.load_toml(workload_file)
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
            tables[0].update(stream_flags)
        return plan.parse_workload(doc, source=str(workload_file), flag_keys=flag_keys)

    doc = {**run_flags, "stream": [dict(stream_flags)]}
    return plan.parse_workload(doc, source="flags", flag_keys=flag_keys)


def execute(
    workload: plan.Workload,
    *,
    results: Path,
    destroy_data: str | None,
    force: bool,
    json_out: bool,
    argv: list[str],
) -> int:
    """Inspect and prepare the target, run the plan, store and print results; exit status."""
    info, compiled = inspect_and_compile(workload, destroy_data=destroy_data, force=force)
    err_console = make_console(stderr=True)
    out_console = err_console if json_out else make_console(stderr=False)
    if not prepare(info, err_console):
        return 130
    outcome = run_plan(workload, info, compiled, results=results, argv=argv, console=err_console)
    if json_out:
        write_json(outcome, {"summary": outcome.summary})
    report(outcome, out_console, err_console)
    return outcome.exit_status or 0


def write_json(outcome: RunOutcome, body: dict[str, Any]) -> None:
    """The machine-readable result on stdout."""
    doc = {
        "run_id": outcome.run_id,
        "run_dir": str(outcome.run_dir.resolve()),
        "complete": outcome.complete,
        **body,
    }
    sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.stdout.flush()


def report(outcome: RunOutcome, out_console: Console, err_console: Console) -> None:
    """The final per-stream table, where results are, and how the run ended."""
    status_word = "failed" if outcome.error else "complete" if outcome.complete else "incomplete"
    title = f"run {outcome.run_id} ({status_word})"
    out_console.print(results_table(outcome.compiled, outcome.summary, title))
    out_console.print(f"results: {outcome.run_dir}", markup=False)
    if outcome.catalog_error:
        err_console.print(
            f"note: the run is saved but not yet in the catalog ({outcome.catalog_error}); "
            "`tilemark runs` adds it",
            markup=False,
        )
    if outcome.error:
        err_console.print(f"run failed: {outcome.error}", markup=False)
    elif outcome.exit_status is not None:
        err_console.print("interrupted: results kept, marked incomplete", markup=False)


def run(
    ctx: typer.Context,
    workload_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="WORKLOAD.toml",
            help="Workload file: run-wide keys, an optional [defaults] table and [[stream]] "
            "tables. Without it, the flags describe one stream.",
            show_default=False,
        ),
    ] = None,
    use_default: Annotated[
        bool,
        typer.Option(
            "--default",
            help="Run the built-in mixed workload (OLTP, log, DSS, lookup, web; 5s warm-up + "
            "30s) on a file of min(2 GiB, 10% of free space).",
        ),
    ] = False,
    target: Annotated[
        str | None,
        typer.Option(
            "--target",
            metavar="PATH",
            help="File (created and filled if missing) or block device. Default with "
            f"--default: {DEFAULT_TARGET}.",
        ),
    ] = None,
    size: Annotated[
        str | None,
        typer.Option(
            "--size", metavar="SIZE", help="Data area to use or create, e.g. 1g (binary units)."
        ),
    ] = None,
    rw: Annotated[
        str | None,
        typer.Option(
            "--rw",
            metavar="MODE",
            help="read, write, randread (default), randwrite, rw/readwrite (sequential mix), "
            "randrw.",
        ),
    ] = None,
    read: Annotated[
        str | None,
        typer.Option("--read", metavar="PCT", help="Read percentage of a mix (default 50)."),
    ] = None,
    bs: Annotated[
        str | None,
        typer.Option(
            "--bs", metavar="SIZE[:W,...]", help="IO size (default 4k) or mix '512:22,1k:15,4k:23'."
        ),
    ] = None,
    qd: Annotated[
        str | None,
        typer.Option(
            "--qd",
            metavar="N",
            help="Queue depth 1..4096 (closed loop: IOs in flight, default 1; open loop: cap, "
            "default 64).",
        ),
    ] = None,
    rate: Annotated[
        str | None,
        typer.Option("--rate", metavar="IOPS", help="Open loop at this IO rate, e.g. 4000."),
    ] = None,
    rate_bytes: Annotated[
        str | None,
        typer.Option(
            "--rate-bytes",
            metavar="RATE",
            help="Open loop at this byte rate: 100MB/s (10^6), 100MiB/s or 100m (binary).",
        ),
    ] = None,
    arrival: Annotated[
        str | None,
        typer.Option(
            "--arrival",
            metavar="KIND",
            help="closed (default without a rate), constant (default with one) or poisson.",
        ),
    ] = None,
    pattern: Annotated[
        str | None,
        typer.Option(
            "--pattern",
            metavar="PATTERN",
            help="Random placement: uniform (default), zipf:1.2, hotspot:90/10.",
        ),
    ] = None,
    random: Annotated[
        str | None,
        typer.Option(
            "--random",
            metavar="PCT",
            help="Share of IOs placed randomly, the rest sequential (default 100 for rand*, "
            "else 0).",
        ),
    ] = None,
    burst: Annotated[
        str | None,
        typer.Option(
            "--burst", metavar="IOS/DELAY", help="Issue IOS IOs, wait for them, pause: 10/5ms."
        ),
    ] = None,
    sync: Annotated[
        str | None,
        typer.Option(
            "--sync", metavar="MODE", help="Write sync: none (default), dsync, fsync or fsync:N."
        ),
    ] = None,
    offset: Annotated[
        str | None,
        typer.Option("--offset", metavar="SIZE", help="Region start within the data area."),
    ] = None,
    length: Annotated[
        str | None,
        typer.Option("--length", metavar="SIZE", help="Region length (default: to the end)."),
    ] = None,
    align: Annotated[
        str | None,
        typer.Option(
            "--align",
            metavar="SIZE",
            help="Offset alignment (default: the O_DIRECT alignment, at least 4k).",
        ),
    ] = None,
    compress: Annotated[
        str | None,
        typer.Option("--compress", metavar="PCT", help="Zeroed share of write data, 0..99."),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="Stream name (default: the rw mode)."),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration", metavar="TIME", help="Measured time after warm-up: 60 (default), 90s, 2m."
        ),
    ] = None,
    warmup: Annotated[
        str | None,
        typer.Option(
            "--warmup", metavar="TIME", help="Warm-up before measuring, excluded from results."
        ),
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option("--interval", metavar="TIME", help="Snapshot interval (default 1s)."),
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend", metavar="NAME", help="IO backend: uring (default), psync or null."
        ),
    ] = None,
    threads: Annotated[
        str | None,
        typer.Option(
            "--threads", metavar="N", help="Engine threads (default: min(CPUs, streams))."
        ),
    ] = None,
    buffered: Annotated[
        bool, typer.Option("--buffered", help="Use the page cache (no O_DIRECT).")
    ] = False,
    poll_us: Annotated[
        str | None,
        typer.Option(
            "--poll-us",
            metavar="US",
            help="uring: spin up to US microseconds for completions before sleeping; more IOPS "
            "and lower latency on fast devices for more CPU (default 0).",
        ),
    ] = None,
    seed: Annotated[
        str | None,
        typer.Option(
            "--seed", metavar="N", help="Run seed; stream seeds derive from it (default 1)."
        ),
    ] = None,
    destroy_data: Annotated[
        str | None,
        typer.Option(
            "--destroy-data",
            metavar="PATH",
            help="Allow writing the block device PATH (must name the target); destroys its data.",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="With --destroy-data: write even if the device is in use or carries a "
            "partition table or filesystem signature.",
        ),
    ] = False,
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print only the JSON summary on stdout (tables go to stderr)."),
    ] = False,
    results: Annotated[
        Path,
        typer.Option("--results", metavar="DIR", help="Results directory."),
    ] = DEFAULT_RESULTS,
    tiles: Annotated[
        int | None,
        typer.Option(
            "--tiles",
            metavar="N",
            help="Run N tiles of emulated applications (the default tile, or --tile FILE) "
            "instead of a workload.",
        ),
    ] = None,
    tile_file: Annotated[
        Path | None,
        typer.Option(
            "--tile", metavar="TILE.toml", help="Tile file: which applications a tile holds."
        ),
    ] = None,
    capacity: CapacityOpt = None,
    sets: SetOpt = None,
    qos_interval: QosIntervalOpt = None,
) -> None:
    """Run a workload: a TOML file, fio-like flags for one stream, --default, or --tiles N."""
    argv = (ctx.obj or {}).get("argv") or ["tilemark", *sys.argv[1:]]
    tile_opts = {
        "--tile": tile_file,
        "--capacity": capacity,
        "--set": sets,
        "--qos-interval": qos_interval,
    }
    if tiles is None:
        given_tile_opt = next((k for k, v in tile_opts.items() if v), None)
        if given_tile_opt:
            raise UsageError(f"{given_tile_opt} applies to tile runs; add --tiles N.")
    else:
        others = {"WORKLOAD.toml": workload_file, "--default": use_default, "--size": size}
        stream_opts = [rw, read, bs, qd, rate, rate_bytes, arrival, pattern, random, burst, sync]
        clash = next((k for k, v in others.items() if v), None)
        if clash or any(v is not None for v in stream_opts):
            raise UsageError(
                f"--tiles runs emulated applications and cannot be combined with "
                f"{clash or 'stream options'}; change applications with --set or a --tile file."
            )
        from tilemark.cli.tiles import run_tiles_command

        status = run_tiles_command(
            tiles,
            tile_file=tile_file,
            target=target,
            capacity=capacity,
            sets=sets or [],
            qos_interval=qos_interval,
            duration=duration,
            warmup=warmup,
            interval=interval,
            backend=backend,
            threads=threads,
            buffered=buffered,
            seed=seed,
            destroy_data=destroy_data,
            force=force,
            json_out=json_out,
            results=results,
            argv=argv,
        )
        if status:
            raise typer.Exit(status)
        return
    given = {
        "target": target,
        "size": size,
        "duration": duration,
        "warmup": warmup,
        "interval": interval,
        "backend": backend,
        "threads": threads,
        "seed": seed,
        "poll_us": poll_us,
    }
    run_flags: dict[str, Any] = {key: value for key, value in given.items() if value is not None}
    if buffered:
        run_flags["direct"] = False
    stream_given = {
        "name": name,
        "rw": rw,
        "read": read,
        "bs": bs,
        "pattern": pattern,
        "random": random,
        "qd": qd,
        "rate": rate,
        "rate_bytes": rate_bytes,
        "arrival": arrival,
        "burst": burst,
        "sync": sync,
        "offset": offset,
        "length": length,
        "align": align,
        "compress": compress,
    }
    stream_flags = {key: value for key, value in stream_given.items() if value is not None}
    if force and destroy_data is None:
        raise UsageError("--force only applies together with --destroy-data PATH.")

    workload = build_workload(workload_file, run_flags, stream_flags, use_default=use_default)
    status = execute(
        workload,
        results=results,
        destroy_data=destroy_data,
        force=force,
        json_out=json_out,
        argv=argv,
    )
    if status:
        raise typer.Exit(status)
