"""`tilemark replay TRACE...`: replay block traces against a target as a run (docs/replay.md).
Parses options into ReplayOptions, calls tilemark.trace.replay.replay, prints what it
returns; the replay's work (and its heavy imports) is there."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.errors import UsageError
from tilemark.units import parse_duration, parse_size


def replay_command(
    ctx: typer.Context,
    traces: Annotated[
        list[Path],
        typer.Argument(
            metavar="TRACE...",
            help="Trace files (tilemark's Parquet trace format; `tilemark trace import` makes "
            "them from other formats). Each is a stream of the run.",
        ),
    ],
    target: Annotated[
        str,
        typer.Option(
            "--target",
            metavar="PATH",
            help="File (created and filled if missing) or block device (with --destroy-data) "
            "the traces are replayed on.",
        ),
    ],
    size: Annotated[
        str | None,
        typer.Option(
            "--size",
            metavar="SIZE",
            help="Data area of a new target file (default: the trace's extent with --remap off, "
            "else as for `tilemark run`).",
        ),
    ] = None,
    speed: Annotated[
        str, typer.Option("--speed", metavar="X", help="Replay X times as fast (timed mode).")
    ] = "1",
    mode: Annotated[
        str,
        typer.Option(
            "--mode",
            metavar="timed|afap|qd:N",
            help="timed: every IO at its recorded time divided by --speed, open loop, latency "
            "from that time; afap: as fast as the trace's dependencies allow; qd:N: closed loop "
            "at depth N in trace order.",
        ),
    ] = "timed",
    times: Annotated[
        str,
        typer.Option(
            "--times",
            metavar="queue|issue",
            help="timed: IOs are due when the traced kernel issued them to the device (issue), "
            "or when the application queued them (queue: the trace's queue_ns where it has "
            "one, else the issue time).",
        ),
    ] = "issue",
    deps: Annotated[
        bool,
        typer.Option(
            "--deps",
            help="timed: also hold each IO until as many IOs completed as had when it was "
            "recorded (a slower target then gets the application's feedback, not a queue).",
        ),
    ] = False,
    keep_gaps: Annotated[
        bool,
        typer.Option(
            "--keep-gaps",
            help="timed: IOs recorded more than 1 us apart go to the device in separate "
            "submissions even when the replay runs late (not back to back).",
        ),
    ] = False,
    writes: Annotated[
        str,
        typer.Option(
            "--writes",
            metavar="traced|direct",
            help="traced: writes the trace recorded as page-cache writeback (no sync flag; "
            "captures and blkparse traces say) go through the page cache uncached and are "
            "written back at once, as the application's were; the rest O_DIRECT. direct: "
            "every write O_DIRECT.",
        ),
    ] = "traced",
    remap: Annotated[
        str,
        typer.Option(
            "--remap",
            metavar="modulo|scale|off",
            help="How trace offsets map into the target: wrapped (modulo), scaled to its size "
            "(scale), or kept (off: a trace beyond the target is refused).",
        ),
    ] = "modulo",
    select: Annotated[
        str | None,
        typer.Option(
            "--select",
            metavar="pid=..,comm=..,op=..",
            help="Replay only these rows (keys may repeat: either value).",
        ),
    ] = None,
    split: Annotated[
        str | None,
        typer.Option(
            "--split", metavar="pid|comm|device", help="One stream per process, name or device."
        ),
    ] = None,
    loop: Annotated[
        bool, typer.Option("--loop", help="Repeat the trace until --duration.")
    ] = False,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            metavar="T",
            help="Replay at most T (timed: the IOs recorded before T; afap and qd: the run "
            "ends at T).",
        ),
    ] = None,
    backend: Annotated[
        str, typer.Option("--backend", metavar="uring|psync|null", help="IO backend.")
    ] = "uring",
    threads: Annotated[
        int | None, typer.Option("--threads", metavar="N", help="Engine threads.")
    ] = None,
    buffered: Annotated[
        bool, typer.Option("--buffered", help="Buffered IO instead of O_DIRECT.")
    ] = False,
    interval: Annotated[
        str, typer.Option("--interval", metavar="T", help="Measurement interval.")
    ] = "1",
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = Path("tilemark-results"),
    destroy_data: Annotated[
        list[str] | None,
        typer.Option(
            "--destroy-data",
            metavar="DEV",
            help="Allow writing this block device (its data is destroyed).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="With --destroy-data: write even a device in use."),
    ] = False,
    label: Annotated[
        str | None, typer.Option("--label", metavar="TEXT", help="A label for the run.")
    ] = None,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the run's summary as JSON on stdout.")
    ] = False,
) -> None:
    """Replay block traces against a target: a run like any other, plus how faithfully it kept
    to the traces (issue lateness, achieved against the traces' rate, IOs skipped)."""
    from tilemark.trace import replay as rp
    from tilemark.trace.iolist import SPLITS
    from tilemark.trace.selection import parse_select

    if force and not destroy_data:
        raise UsageError("--force only applies together with --destroy-data DEV.")
    replay_mode, depth = rp.parse_mode(mode)
    threads_n = threads
    if threads_n is not None and not 1 <= threads_n <= 1024:
        raise UsageError(f"--threads must be from 1 to 1024, got {threads_n}.")
    options = rp.ReplayOptions(
        traces=tuple(traces),
        target=target,
        size=None if size is None else parse_size(size, "--size"),
        speed=rp.parse_speed(speed),
        mode=replay_mode,
        times=rp.parse_choice(times, "--times", rp.TIMES),
        deps=deps,
        keep_gaps=keep_gaps,
        writes=rp.parse_choice(writes, "--writes", rp.WRITES),
        depth=depth,
        remap=rp.parse_choice(remap, "--remap", rp.REMAPS),
        select=parse_select(select),
        split=None if split is None else rp.parse_choice(split, "--split", SPLITS),
        loop=loop,
        duration_s=None if duration is None else _positive(parse_duration(duration, "--duration")),
        backend=rp.parse_choice(backend, "--backend", ("uring", "psync", "null")),
        threads=threads_n,
        direct=not buffered,
        interval_s=_positive(parse_duration(interval, "--interval")),
        results=results,
        destroy_data=tuple(destroy_data or ()),
        force=force,
        label=label,
    )
    _run(ctx, options, json_out)


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise UsageError(f"a duration must be above 0, got {seconds:g} s.")
    return seconds


def _run(ctx: typer.Context, options, json_out: bool) -> None:  # noqa: ANN001
    from tilemark.cli.common import argv_of, consoles, print_run, write_json
    from tilemark.commands import replay as replay_command_
    from tilemark.trace import accuracy

    out, err = consoles(json_out)
    result = replay_command_.run(options, argv=argv_of(ctx), console=err)
    if json_out:
        write_json(result.outcome, {"summary": result.outcome.summary})
    print_run(result.outcome, out, err)
    if result.replay:
        for line in accuracy.lines(result.replay):
            out.print(line, markup=False, soft_wrap=True)
    if result.exit_status:
        raise typer.Exit(result.exit_status)
