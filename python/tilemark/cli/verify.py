"""`tilemark verify RUN_OR_TARGET`: read a whole data area back and check every block (the
Jetstress checksum pass), timed, in parallel, with progress; exit 1 when anything is found."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.errors import UsageError
from tilemark.targets import verification
from tilemark.units import format_size

MAX_THREADS = 64
SHOWN = 20


def verify(
    run_or_target: Annotated[
        str,
        typer.Argument(
            metavar="RUN_OR_TARGET",
            help="A run made with --verify (id, unique id prefix or directory: checked against "
            "its journal), or a target (file or block device: every block checked as tilemark "
            "data of that target).",
        ),
    ],
    json_out: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print the result as JSON on stdout, every finding with its offset and class.",
        ),
    ] = False,
    threads: Annotated[
        int, typer.Option("--threads", metavar="N", help="Reader threads (default 4).")
    ] = 4,
    results: Annotated[
        Path,
        typer.Option("--results", metavar="DIR", help="Results directory holding the run."),
    ] = DEFAULT_RESULTS,
) -> None:
    """Verify a run's or a target's data: MB/s, time taken, findings by class."""
    if not 1 <= threads <= MAX_THREADS:
        raise UsageError(f"--threads must be from 1 to {MAX_THREADS}, got {threads}.")
    passes = verification.plan_pass(run_or_target, results, threads)
    failed = False
    outputs = []
    for p in passes:
        for note in p.notes or []:
            typer.echo(f"note: {note}", err=True)
        result = verification.execute(p, verification.progress_printer(p.path))
        outputs.append({"verified": p.what, **result})
        if not json_out:
            _print(p.what, result)
        if not result["complete"]:
            typer.echo("interrupted: the pass did not read the whole data area", err=True)
        failed |= result["total"] > 0 or bool(result["io_errors"]) or not result["complete"]
        if not result["complete"]:
            break
    if json_out:
        shown = outputs[0] if len(outputs) == 1 else {"passes": outputs}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
    raise typer.Exit(1 if failed else 0)


def _print(what: str, r: dict) -> None:
    typer.echo(
        f"verified {what}: {format_size(r['bytes'])} in {r['seconds']:.1f} s "
        f"({r['mbps']:,.0f} MB/s, {r['threads']} threads): {r['checked']:,} blocks checked, "
        f"{r['total']:,} findings"
        + (f" ({verification.count_text(r['by_class'])})" if r["total"] else "")
    )
    counted = []
    if r["skipped"]:
        counted.append(f"{r['skipped']:,} not judged (content unknown)")
    if r["not_tilemark"]:
        counted.append(f"{r['not_tilemark']:,} written without verification")
    if r["later"]:
        counted.append(f"{r['later']:,} rewritten by later runs")
    if counted:
        typer.echo("blocks " + ", ".join(counted))
    for f in r["findings"][:SHOWN]:
        typer.echo(f"  {verification.finding_text(f)}")
    if r["total"] > SHOWN:
        typer.echo(f"  ... {r['total'] - SHOWN:,} more (--json lists up to 1,000)")
    if r["io_errors"]:
        typer.echo(f"read errors: {r['first_io_error']} ({sum(r['io_errors'].values())} chunks)")
