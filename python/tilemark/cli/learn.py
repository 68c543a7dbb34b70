"""`tilemark learn TRACE... -o app.toml`: a profile that runs in tiles, learned from block traces
(tilemark/learn/; docs/learn.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tilemark.console import make_console
from tilemark.units import format_size, parse_duration, parse_size


def learn(
    traces: Annotated[
        list[Path],
        typer.Argument(metavar="TRACE...", help="Trace files of one application (docs/traces.md)."),
    ],
    output: Annotated[
        Path,
        typer.Option("-o", "--output", metavar="APP.toml", help="Profile file to write."),
    ],
    chunk: Annotated[
        str | None,
        typer.Option(
            "--chunk",
            metavar="TIME",
            help="Cut the trace into chunks of TIME (30s) and give streams whose rate moves "
            "from chunk to chunk phases (start/stop run times: the profile then runs for the "
            "trace's span).",
        ),
    ] = None,
    name: Annotated[
        str | None,
        typer.Option("--name", metavar="NAME", help="Profile name (default: the file's stem)."),
    ] = None,
    unit: Annotated[
        str | None,
        typer.Option(
            "--unit",
            metavar="NAME=PER_SECOND",
            help="The application's own unit and what the traced run achieved (tps=850): the "
            "profile's metric is then NAME, from the IOs per NAME of the trace.",
        ),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(
            "--device",
            metavar="ID",
            help="Learn the requests of this device only (the trace's device column, 7:3); "
            "needed when a trace holds several.",
        ),
    ] = None,
    wait: Annotated[
        str | None,
        typer.Option(
            "--wait",
            metavar="STAT=MS",
            help="QoS for the streams the application waits for (reads, sync writes): their "
            "response time STAT (p95, p99, mean, ...) at most MS, e.g. p95=20 (docs/learn.md: "
            "from an application's SLO to storage QoS).",
        ),
    ] = None,
    layout: Annotated[
        str,
        typer.Option(
            "--layout",
            metavar="HOW",
            help="trace: areas at their places on the traced device (jumps between streams as "
            "long as the application's; the capacity spans them); compact: end to end.",
        ),
    ] = "trace",
    max_capacity: Annotated[
        str | None,
        typer.Option(
            "--max-capacity",
            metavar="SIZE",
            help="With --layout trace: shrink the gaps between areas so a tile spans at most "
            "SIZE (the areas keep their sizes).",
        ),
    ] = None,
    force: Annotated[
        bool,
        typer.Option("--force", help="Replace an existing APP.toml tilemark did not write."),
    ] = False,
) -> None:
    """Learn a profile from block traces: streams per process and kind, their rates, mixes,
    placement, sync and concurrency; it runs in tiles like the built-in ones."""
    from tilemark.learn import LearnOptions
    from tilemark.learn import learn as do_learn

    chunk_s = parse_duration(chunk, "--chunk") if chunk is not None else None
    result = do_learn(
        LearnOptions(
            traces=tuple(traces),
            output=output,
            name=name,
            chunk_s=chunk_s,
            unit=unit,
            device=device,
            wait=wait,
            layout=layout,
            max_capacity=parse_size(max_capacity, "--max-capacity") if max_capacity else None,
            force=force,
        )
    )
    from rich.table import Table

    out = make_console(stderr=False)
    table = Table(title=f"{result.name}: {result.output}", title_justify="left")
    for col in ("stream", "procs", "IOs", "IOPS", "read %", "bs", "pattern", "random %",
                "arrival", "qd", "sync", "phases"):  # fmt: skip
        table.add_column(col)
    for s in result.streams:
        table.add_row(
            s.name, str(s.processes), str(s.ios), f"{s.rate_iops:.4g}", f"{s.read_pct:.0f}",
            s.sizes, s.pattern, f"{s.random_pct:g}", s.arrival, str(s.qd or "-"), s.sync,
            str(s.phases or "-"),
        )  # fmt: skip
    out.print(table)
    out.print(
        f"{result.ios} reads and writes over {result.span_s:.4g} s; capacity per tile "
        f"{format_size(result.capacity)}; model {result.model_bytes} bytes = "
        f"{result.model_bytes / max(result.trace_bytes, 1):.2%} of the trace's "
        f"{format_size(result.trace_bytes)}",
        markup=False,
    )
    for note in result.notes:
        out.print(f"note: {note}", markup=False)
