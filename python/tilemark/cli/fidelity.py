"""`tilemark fidelity A B`: how closely two IO streams agree, property by property
(trace/fidelity.py; the formulas in docs/fidelity.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tilemark.console import make_console
from tilemark.errors import UsageError


def _shown(prop: str, value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return ", ".join(_shown(prop, v) for v in value)
    if not isinstance(value, float | int):
        return str(value)
    if prop == "throughput":
        return f"{value / 1e6:,.2f} MB/s"
    if prop == "footprint":
        return f"{value / 2**20:,.1f} MiB"
    if prop == "rate":
        return f"{value:,.1f} IOPS"
    return f"{value:.3g}"


def fidelity(
    a: Annotated[Path, typer.Argument(metavar="A", help="Trace file (the reference).")],
    b: Annotated[Path, typer.Argument(metavar="B", help="Trace file to compare with A.")],
    same_device: Annotated[
        bool,
        typer.Option("--same-device", help="Both ran on the same device: compare latency too."),
    ] = False,
    require: Annotated[
        float | None,
        typer.Option(
            "--require",
            metavar="ACC",
            help="Exit 3 when any property scores below ACC (0..1), e.g. 0.90.",
        ),
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the comparison as JSON.")] = False,
    record: Annotated[
        Path | None,
        typer.Option(
            "--record",
            metavar="PROFILE.toml",
            help="A profile learned from A (tilemark learn): write these scores into its "
            "[learned.fidelity], so `profiles show` reports them.",
        ),
    ] = None,
) -> None:
    """Compare two IO streams property by property: accuracy per property and overall."""
    from tilemark.trace import fidelity as fid
    from tilemark.trace.schema import open_trace

    if require is not None and not 0 <= require <= 1:
        raise UsageError(f"--require must be an accuracy from 0 to 1, got {require:g}.")
    ca = fid.characterize(open_trace(a), name=str(a))
    cb = fid.characterize(open_trace(b), name=str(b))
    accs = fid.compare(ca, cb, same_device=same_device)
    score = fid.overall(accs)
    if record is not None:
        from tilemark.learn.record import record_scores

        record_scores(record, a, b, accs, score, same_device=same_device)
    below = [
        x for x in accs if require is not None and x.accuracy is not None and x.accuracy < require
    ]
    if json_out:
        doc = {
            "a": str(a),
            "b": str(b),
            "overall": score,
            "properties": [
                {"property": x.property, "a": x.a, "b": x.b, "accuracy": x.accuracy,
                 "not_compared": x.why_not, "measure": x.description}
                for x in accs
            ],
        }  # fmt: skip
        typer.echo(json.dumps(doc, indent=2))
    else:
        from rich.table import Table

        out = make_console(stderr=False)
        table = Table(title=f"fidelity of {b} to {a}", title_justify="left")
        for col in ("property", "A", "B", "accuracy", "measure"):
            table.add_column(col, justify="right" if col == "accuracy" else "left")
        for x in accs:
            acc = "-" if x.accuracy is None else f"{x.accuracy:.3f}"
            table.add_row(
                x.property, _shown(x.property, x.a), _shown(x.property, x.b), acc,
                x.why_not or x.description,
            )  # fmt: skip
        out.print(table)
        shown = "-" if score is None else f"{score:.3f}"
        out.print(f"overall: {shown} (mean of {sum(x.accuracy is not None for x in accs)} "
                  "properties)", markup=False)  # fmt: skip
        for x in below:
            out.print(f"below {require:g}: {x.property} {x.accuracy:.3f}", markup=False)
    if below:
        raise typer.Exit(3)
