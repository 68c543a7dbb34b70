"""`tilemark trace import FILE -o TRACE`: a blkparse, fio iolog or published CSV trace as a
tilemark trace file (tilemark.trace.importer does the work; docs/traces.md the formats)."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from tilemark.trace.importer import ImportResult

FORMATS_HELP = "blkparse, iolog, msr, alibaba or tencent"


def trace_import(
    source: Annotated[
        Path, typer.Argument(metavar="FILE", help="Trace to import (.gz, .bz2, .zst read as is).")
    ],
    output: Annotated[
        Path,
        typer.Option("--output", "-o", metavar="TRACE", help="Trace file to write (Parquet)."),
    ],
    fmt: Annotated[
        str | None,
        typer.Option("--format", "-f", metavar="F", help=f"{FORMATS_HELP} (default: detected)."),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            metavar="ID",
            help="Import only this device (8:16, an MSR volume hm_1, an Alibaba or Tencent id).",
        ),
    ] = None,
    reorder_window: Annotated[
        int,
        typer.Option(
            "--reorder-window",
            metavar="ROWS",
            help="Rows that may arrive after rows with later times (they are sorted).",
        ),
    ] = 128 * 1024,
    force: Annotated[bool, typer.Option("--force", help="Replace TRACE if it exists.")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
) -> None:
    """Import a trace (blkparse text, fio iolog v2/v3, MSR Cambridge, Alibaba or Tencent CBS
    CSV) into a tilemark trace file, sorted by issue time."""
    from tilemark.trace.importer import import_trace

    with _progress(source) as tick:
        result = import_trace(
            source,
            fmt,
            output,
            device=device,
            force=force,
            reorder_rows=reorder_window,
            progress=tick,
        )
    if json_out:
        doc = asdict(result)
        doc.update(source=str(result.source), out=str(result.out))
        doc.update(mb_per_s=round(result.mb_per_s, 3), rows_per_s=round(result.rows_per_s, 1))
        typer.echo(json.dumps(doc, indent=2))
        return
    for line in result_lines(result):
        typer.echo(line)


@contextlib.contextmanager
def _progress(source: Path) -> Iterator[Callable[[int], None] | None]:
    """A progress bar of the text read, on a terminal's stderr (large traces take minutes)."""
    if not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn

    compressed = source.suffix in (".gz", ".bz2", ".zst", ".lz4")
    try:
        total = None if compressed else source.stat().st_size
    except OSError:
        total = None
    columns = [BarColumn(), DownloadColumn(binary_units=False), TimeRemainingColumn()]
    with Progress(*columns, transient=True, console=_stderr_console()) as bar:
        task = bar.add_task("import", total=total)
        yield lambda done: bar.update(task, completed=done)


def _stderr_console():
    from rich.console import Console

    return Console(stderr=True)


def result_lines(r: ImportResult) -> list[str]:
    """What an import did, in a few lines."""
    from tilemark.trace.summary import duration_text

    devices = f"{r.devices:,} device" + ("s" if r.devices != 1 else "")
    lines = [
        f"{r.out}: {r.rows:,} requests of {devices} over {duration_text(r.duration_s)} "
        f"(from {r.source} as {r.format})",
        f"read {r.bytes_read / 1e6:,.1f} MB in {r.seconds:.2f} s: {r.mb_per_s:,.1f} MB/s, "
        f"{r.rows_per_s:,.0f} requests/s",
    ]
    if r.events_lost:
        lines.append(f"events lost while tracing (blkparse Skips): {r.events_lost:,}")
    for s in r.skipped:
        lines.append(f"skipped {s.count:,} {s.reason} (first at line {s.first_line})")
    lines += [f"note: {n}" for n in r.notes if not n.startswith("skipped ")]
    return lines
