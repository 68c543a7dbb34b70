"""`tilemark verify RUN_OR_TARGET`: read a whole data area back and check every block (the
Jetstress checksum pass), timed, in parallel, with progress; exit 1 when anything is found."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from tilemark.cli.common import DEFAULT_RESULTS
from tilemark.commands import verify as verify_command
from tilemark.targets import verification
from tilemark.units import format_size

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

    def finished(what: str, result: dict) -> None:
        if not json_out:
            _print(what, result)
        if result.get("interrupted_by"):
            typer.echo(
                f"interrupted by {result['interrupted_by']}: the pass so far is kept, marked "
                "incomplete",
                err=True,
            )
        elif not result["complete"]:
            typer.echo("interrupted: the pass did not read the whole data area", err=True)

    outcome = verify_command.run(
        run_or_target,
        results=results,
        threads=threads,
        note=lambda text: typer.echo(f"note: {text}", err=True),
        finished=finished,
    )
    if json_out:
        outputs = [{"verified": what, **result} for what, result in outcome.passes]
        shown = outputs[0] if len(outputs) == 1 else {"passes": outputs}
        sys.stdout.write(json.dumps(shown, indent=2) + "\n")
    raise typer.Exit(outcome.exit_status)


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
