"""`tilemark trace show TRACE`: a trace's summary, with --html its charts as an offline report
(tilemark.trace.show does the work; docs/traces.md says what each number means)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.table import Table

    from tilemark.trace.summary import TraceSummary


def trace_show(
    trace: Annotated[Path, typer.Argument(metavar="TRACE", help="Trace file (Parquet).")],
    html: Annotated[
        Path | None,
        typer.Option("--html", metavar="FILE", help="Also write an offline HTML report here."),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace FILE even if tilemark did not write it.")
    ] = False,
) -> None:
    """Summarize a trace (IOs, MB, read share, sizes, IOPS, devices, processes, flags); with
    --html, chart it: IOPS and MB/s, read share and outstanding IOs over time, sizes, the LBA
    heatmap and the inter-arrival CDF."""
    from tilemark.trace.show import show_trace, summary_doc

    result = show_trace(trace, html=html, force=force)
    if json_out:
        doc = summary_doc(result.summary)
        if result.html is not None:
            doc["html"] = str(result.html)
        typer.echo(json.dumps(doc, indent=2))
        return
    from tilemark.console import make_console, say

    console = make_console(stderr=False)
    console.print(summary_table(result.summary))
    for note in result.summary.notes:
        say(console, f"note: {note}")
    if result.html is not None:
        say(console, f"report: {result.html}")


def summary_table(s: TraceSummary) -> Table:
    """The summary as a two-column table."""
    from rich import box
    from rich.table import Table

    from tilemark.trace.schema import FLAGS
    from tilemark.trace.summary import duration_text
    from tilemark.units import format_size

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.1%}"

    def mb(n: int) -> str:
        return f"{n / 1e6:,.1f} MB"

    t = Table(title=f"trace {s.path}", box=box.SIMPLE_HEAD, show_header=False, title_justify="left")
    t.add_column("what", style="bold")
    t.add_column("value", overflow="fold")
    t.add_row("source", s.source + (f" ({s.source_file})" if s.source_file else ""))
    t.add_row(
        "IOs",
        f"{s.ios:,} (reads {s.reads:,}, writes {s.writes:,}, flushes "
        f"{s.flushes:,}, discards {s.discards:,})",
    )
    t.add_row("read", f"{mb(s.bytes_read)}" + _rate(s.mb_per_s(s.bytes_read)))
    t.add_row("written", f"{mb(s.bytes_written)}" + _rate(s.mb_per_s(s.bytes_written)))
    if s.discards:
        t.add_row("discarded", mb(s.bytes_discarded))
    t.add_row("read share", f"{pct(s.read_share)} of reads + writes")
    iops = "-" if s.iops_mean is None else f"{s.iops_mean:,.1f}"
    t.add_row("IOPS", f"{iops} mean, {s.iops_peak:,} in the busiest second")
    t.add_row("duration", duration_text(s.duration_s))
    sizes = ", ".join(f"{format_size(size)} {s.share(n):.1%}" for size, n in s.sizes)
    t.add_row("sizes", f"{sizes} ({s.size_count:,} distinct)")
    t.add_row("flags", ", ".join(f"{f} {s.share(s.flags.get(f, 0)):.1%}" for f in FLAGS))
    if s.latency is not None:
        lat = s.latency
        t.add_row(
            "latency",
            f"mean {lat.mean_ns / 1e6:.3g} ms, p50 {lat.p50_ns / 1e6:.3g} ms, "
            f"p99 {lat.p99_ns / 1e6:.3g} ms, max {lat.max_ns / 1e6:.3g} ms",
        )
    t.add_row("devices", _top(s.devices, s.device_count, s.device))
    t.add_row("processes", _top(s.processes, s.process_count, None))
    t.add_row("events lost", f"{s.events_lost:,}")
    return t


def _rate(value: float | None) -> str:
    return "" if value is None else f" ({value:,.2f} MB/s mean)"


def _top(items: tuple[tuple[str, int], ...], total: int, single: str | None) -> str:
    if not items:
        return single or "-"
    text = ", ".join(f"{name} {n:,}" for name, n in items)
    return text + (f" (top {len(items)} of {total:,})" if total > len(items) else "")
