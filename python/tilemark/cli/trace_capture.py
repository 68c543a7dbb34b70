"""`tilemark trace capture --device DEV [--duration T] [-o TRACE] [-- CMD ARGS...]`: record every
block request of a device (and what serves it) from the kernel into a trace file."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tilemark.units import format_size, parse_duration, parse_size

if TYPE_CHECKING:
    from tilemark.trace.capture import CaptureProgress, CaptureResult


def trace_capture(
    device: Annotated[
        str,
        typer.Option(
            "--device",
            metavar="DEV",
            help="Block device to trace (/dev/loop3, /dev/sdb1), or a file or directory: the "
            "devices under its filesystem. Loop devices' backing disks and partitions' disks are "
            "traced too; the trace's device column tells them apart.",
        ),
    ],
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="[-- CMD ARGS...]",
            help="Trace while this command runs (it is started once tracing is on); its exit "
            "status is printed and stored in the trace.",
            show_default=False,
        ),
    ] = None,
    duration: Annotated[
        str | None,
        typer.Option(
            "--duration",
            metavar="TIME",
            help="Trace for this long: 30s, 5m (default: until the command exits, or until "
            "Ctrl-C without a command).",
        ),
    ] = None,
    output: Annotated[
        Path | None,
        typer.Option(
            "-o",
            "--output",
            metavar="TRACE",
            help="Trace file to write (Parquet, docs/traces.md) (default "
            "trace-DEVNAME-YYYYmmdd-HHMMSS.parquet here).",
        ),
    ] = None,
    no_backing: Annotated[
        bool,
        typer.Option(
            "--no-backing",
            help="Trace only the device named, not the devices under it (a loop device's "
            "backing disk carries everything else on that filesystem too).",
        ),
    ] = False,
    buffer: Annotated[
        str | None,
        typer.Option(
            "--buffer",
            metavar="SIZE",
            help="Kernel trace buffer per CPU; a larger one rides out longer stalls of the "
            "reader (default 128 MiB spread over the CPUs, 8 to 64 MiB each).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an existing TRACE that tilemark did not write."),
    ] = False,
) -> None:
    """Capture every block request of a device from the kernel (tracefs) as a trace file:
    issue and completion times, op, offset, size, flags, process; live progress and a summary.
    Needs root. Exit 0 when the capture was written (whatever the command's status), 2 when
    tracing is impossible (nothing written)."""
    from tilemark.trace.capture import capture

    seconds = parse_duration(duration, "--duration") if duration is not None else None
    buffer_kb = max(1, parse_size(buffer, "--buffer") // 1024) if buffer is not None else None
    out = output if output is not None else _default_output(device)
    with _Progress(f"tracing {device} into {out}") as shown:
        result = capture(
            device,
            out,
            duration_s=seconds,
            command=command,
            progress=shown.update,
            with_backing=not no_backing,
            force=force,
            buffer_kb=buffer_kb,
        )
    _print_summary(result)


def _default_output(device: str) -> Path:
    name = Path(device).name or "trace"
    return Path(f"trace-{name}-{time.strftime('%Y%m%d-%H%M%S')}.parquet")


class _Progress:
    """One line on stderr every second: IOs, MB/s, events lost (redrawn in place on a TTY)."""

    def __init__(self, title: str) -> None:
        from rich.console import Console

        self.console = Console(stderr=True, highlight=False)
        self.title = title
        self._live = None

    def __enter__(self) -> _Progress:
        if self.console.is_terminal:
            from rich.live import Live
            from rich.text import Text

            self._live = Live(Text(""), console=self.console, auto_refresh=False)
            self._live.__enter__()
        return self

    def update(self, p: CaptureProgress) -> None:
        if p.elapsed_s == 0:
            stops = "the command's end or Ctrl-C stops" if p.command_running else "Ctrl-C stops"
            title = f"{self.title} ({stops} and keeps the trace)"
            if self._live is not None:
                self.console.print(title, markup=False)
            else:
                sys.stderr.write(title + "\n")
                sys.stderr.flush()
            return
        line = (
            f"{p.elapsed_s:6.0f} s  {p.ios:,} IOs  {p.iops:,.0f} IOPS  {p.mb_per_s:,.1f} MB/s  "
            f"events lost {p.events_lost:,}"
        )
        if p.command_running is False:
            line += "  (command exited)"
        if self._live is not None:
            from rich.text import Text

            self._live.update(Text(line), refresh=True)
        else:
            sys.stderr.write(line + "\n")
            sys.stderr.flush()

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.__exit__(None, None, None)


def _print_summary(r: CaptureResult) -> None:
    echo = typer.echo
    devices = ", ".join(f"{d.name} ({d.dev})" for d in r.devices)
    echo(f"trace: {r.path}")
    echo(f"devices: {devices}")
    echo(f"stopped by: {r.stopped_by} after {r.duration_s:.1f} s")
    if r.command is not None:
        status = "still running" if r.command_exit is None else f"exit status {r.command_exit}"
        echo(f"command: {' '.join(r.command)} ({status})")
    share = f"{r.read_share * 100:.1f}%" if r.read_share is not None else "-"
    echo(
        f"requests: {r.ios:,} ({r.reads:,} reads, {r.writes:,} writes, {r.flushes:,} flushes, "
        f"{r.discards:,} discards), {r.bytes / 1e6:,.1f} MB, read share {share}"
    )
    echo(f"rate: {r.iops:,.0f} IOPS, {r.mb_per_s:,.1f} MB/s over {r.duration_s:.1f} s")
    if r.size_mix:
        rw = sum(n for _, n in r.size_mix)
        shown = [f"{format_size(s)} {n / rw * 100:.0f}%" for s, n in r.size_mix[:6]]
        rest = sum(n for _, n in r.size_mix[6:])
        if rest:
            shown.append(f"other {rest / rw * 100:.0f}%")
        echo(f"sizes (reads and writes): {', '.join(shown)}")
    echo(
        f"events lost: {r.events_lost:,}; issued before the capture: "
        f"{r.completions_without_issue:,}; in flight at the end: {r.in_flight_at_end:,}"
    )
    for note in r.notes:
        echo(f"note: {note}", err=True)
