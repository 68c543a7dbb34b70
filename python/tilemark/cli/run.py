"""`tilemark run`: validate a workload, prepare its target, run it, store and show the results.

Everything the user typed is validated before any IO (UsageError, exit 2). Interrupting a run
(Ctrl-C, SIGTERM) stops the engine in order: the intervals measured so far are written and the
run is marked incomplete, and the exit status is 128 + the signal number.
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console

from tilemark import engine, plan, targets
from tilemark.cli.live import LiveDisplay, results_table
from tilemark.errors import RunError, UsageError
from tilemark.store import RunWriter
from tilemark.summary import summarize
from tilemark.units import format_size, parse_size

DEFAULT_TARGET = f"{targets.DEFAULT_DATA_DIR}/scratch.dat"
DEFAULT_RESULTS = Path("tilemark-results")
POLL_S = 0.2


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


class SignalStopper:
    """Turns SIGINT and SIGTERM into an orderly engine stop instead of an exception."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.count = 0
        self.handle: engine.Handle | None = None
        self._previous: dict[int, Any] = {}

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        if self.signum is None:
            self.signum = signum
            if self.handle is not None:
                self.handle.stop()

    def attach(self, handle: engine.Handle) -> None:
        """Stop this handle on a signal (at once if one already arrived)."""
        self.handle = handle
        if self.signum is not None:
            handle.stop()

    def __enter__(self) -> SignalStopper:
        self._previous = {s: signal.signal(s, self) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for s, previous in self._previous.items():
            signal.signal(s, previous)

    @property
    def exit_status(self) -> int | None:
        """128 + the first signal, as shells report a process killed by it."""
        return None if self.signum is None else 128 + self.signum


def _fill_reporter(tty: bool) -> targets.Progress:
    last_line = [""]

    def report(path: str, done: int, total: int) -> None:
        line = (
            f"preparing {path}: filled {format_size(done)} of {format_size(total)} "
            f"({100 * done / total:.0f}%)"
        )
        if tty:
            end = "\n" if done >= total else ""
            sys.stderr.write("\r" + line.ljust(len(last_line[0])) + end)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()
        last_line[0] = line

    return report


def _console(*, stderr: bool) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        # Logs and pipes have no width; the results table needs about 130 columns.
        console = Console(stderr=stderr, highlight=False, width=160)
    return console


def _describe(compiled: dict[str, Any], info: targets.TargetInfo) -> str:
    mode = "O_DIRECT" if info.direct else "buffered"
    timing = f"{compiled['duration_ms'] / 1000:g}s"
    if compiled["warmup_ms"]:
        timing = f"{compiled['warmup_ms'] / 1000:g}s warm-up + {timing}"
    count = len(compiled["streams"])
    return (
        f"{count} stream{'s' if count != 1 else ''} on {info.path} "
        f"({format_size(info.data_length)}, {mode}), backend {compiled['backend']}, "
        f"{compiled['threads']} thread{'s' if compiled['threads'] != 1 else ''}, {timing}"
    )


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
    info = targets.inspect_target(
        workload.target,
        size=workload.size,
        writes=workload.writes(),
        direct=workload.direct,
        destroy_data=destroy_data,
        force=force,
    )
    compiled = plan.compile_plan(workload, info)
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--results {results} cannot be created: {e.strerror}.") from None

    err_console = _console(stderr=True)
    out_console = err_console if json_out else _console(stderr=False)
    tty = err_console.is_terminal
    if info.kind == "file" and info.tilemark and info.filled_length < info.file_data_length:
        todo = info.file_data_length - info.filled_length
        verb = "creating" if not info.exists else "filling"
        err_console.print(
            f"{verb} {info.path}: writing {format_size(todo)} so reads never hit holes",
            markup=False,
        )
    try:
        targets.prepare_target(info, progress=_fill_reporter(tty))
    except KeyboardInterrupt:
        err_console.print(
            "interrupted while preparing the target; the part already filled is kept and "
            "reused next time",
            markup=False,
        )
        return 130

    try:
        writer = RunWriter(
            results, plan=compiled, workload=workload.to_json(), targets=[info.record()], argv=argv
        )
    except OSError as e:
        raise RunError(f"cannot write results under {results}: {e.strerror or e}.") from None
    err_console.print(f"run {writer.run_id}: {_describe(compiled, info)}", markup=False)

    with SignalStopper() as stopper:
        try:
            handle = engine.start(compiled)
        except engine.EngineError as e:
            writer.finish(None, summary=None, complete=False, error=str(e))
            raise
        stopper.attach(handle)
        result, error = _drive(handle, writer, compiled, err_console, tty, stopper)
        if error is not None:
            writer.finish(None, summary=None, complete=False, error=error)
            raise engine.EngineError(error)
        try:
            summary = summarize(compiled, result)
        except Exception as e:
            # Keep the engine's result on disk even if summarizing it fails.
            writer.finish(result, summary=None, complete=False, error=f"summary failed: {e}")
            raise
        complete = bool(result.get("complete")) and stopper.signum is None
        run_dir = writer.finish(result, summary=summary, complete=complete)

    if json_out:
        doc = {
            "run_id": writer.run_id,
            "run_dir": str(Path(run_dir).resolve()),
            "complete": complete,
            "summary": summary,
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
        sys.stdout.flush()
    status_word = "complete" if complete else "incomplete"
    out_console.print(results_table(compiled, summary, f"run {writer.run_id} ({status_word})"))
    out_console.print(f"results: {run_dir}", markup=False)
    if writer.catalog_error:
        err_console.print(
            f"note: the run is saved but not yet in the catalog ({writer.catalog_error}); "
            "`tilemark runs` adds it",
            markup=False,
        )
    if stopper.exit_status is not None:
        err_console.print("interrupted: results kept, marked incomplete", markup=False)
        return stopper.exit_status
    return 0


def _drive(
    handle: engine.Handle,
    writer: RunWriter,
    compiled: dict[str, Any],
    console: Console,
    tty: bool,
    stopper: SignalStopper,
) -> tuple[dict[str, Any] | None, str | None]:
    """Poll the engine until it ends, storing and showing snapshots; (result, engine error)."""
    noted = 0
    try:
        with LiveDisplay(compiled, console, tty=tty) as display:
            while True:
                finished = handle.wait(POLL_S)
                snapshots = handle.poll()
                if snapshots:
                    writer.add_snapshots(snapshots)
                    display.update(snapshots)
                if stopper.count > noted:
                    display.note(
                        "stopping: finishing in-flight IOs, the results so far are kept"
                        if noted == 0
                        else "already stopping; the results so far are kept"
                    )
                    noted = stopper.count
                if finished:
                    break
            # Snapshots published while the run ended.
            snapshots = handle.poll()
            if snapshots:
                writer.add_snapshots(snapshots)
                display.update(snapshots)
        return handle.result(), None
    except engine.EngineError as e:
        return None, str(e)
    except BaseException as e:
        # Whatever went wrong on our side, stop the IO and keep what was measured.
        handle.stop()
        handle.wait(30.0)
        try:
            writer.add_snapshots(handle.poll())
        finally:
            writer.finish(None, summary=None, complete=False, error=f"{type(e).__name__}: {e}")
        raise


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
) -> None:
    """Run a workload: a TOML file, fio-like flags for one stream, or --default."""
    given = {
        "target": target,
        "size": size,
        "duration": duration,
        "warmup": warmup,
        "interval": interval,
        "backend": backend,
        "threads": threads,
        "seed": seed,
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
    argv = (ctx.obj or {}).get("argv") or ["tilemark", *sys.argv[1:]]
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
