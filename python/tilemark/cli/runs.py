"""`tilemark runs`: list the runs stored under a results directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from tilemark.store import list_runs


def _number(value: float | None) -> str:
    """Thousands separators for big numbers, two decimals for small ones (0.35 MB/s)."""
    if value is None:
        return "-"
    if abs(value) >= 1000 or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(seconds, 60.0)
    return f"{int(minutes)}m{secs:04.1f}s" if minutes else f"{secs:.1f}s"


def _started(iso: str | None) -> str:
    # Stored as ISO UTC with milliseconds; the table shows seconds and says UTC once.
    return "-" if not iso else iso.replace("T", " ")[:19]


COLUMNS = ("id", "started", "status", "backend", "streams", "duration", "IOPS", "MB/s", "errors")
# Dropped in this order when the terminal is too narrow: the run directory is results/<id>,
# and the id itself starts with the UTC start time.
OPTIONAL_COLUMNS = ("path", "started")


def _cells(r: dict[str, Any]) -> dict[str, str]:
    status = r.get("status") or "-"
    style = {"complete": "green", "incomplete": "yellow", "failed": "red"}.get(status, "cyan")
    errors = r.get("errors")
    return {
        "id": r["run_id"],
        "started": _started(r.get("started_at")),
        "status": f"[{style}]{status}[/]",
        "backend": r.get("backend") or "-",
        "streams": _number(r.get("streams")),
        "duration": _duration(r.get("duration_s")),
        "IOPS": _number(r.get("total_iops")),
        "MB/s": _number(r.get("total_mbps")),
        "errors": "-" if errors is None else (f"[red]{errors:,}[/]" if errors else "0"),
        "path": r.get("path") or "-",
    }


def runs_table(rows: list[dict[str, Any]], results: Path, *, drop: tuple[str, ...] = ()) -> Table:
    """A rich table of catalog rows (newest first as given), without the `drop` columns."""
    table = Table(
        title=f"runs under {results}",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    names = [n for n in (*COLUMNS, "path") if n not in drop]
    for name in names:
        header = "started (UTC)" if name == "started" else name
        numeric = name in ("streams", "duration", "IOPS", "MB/s", "errors")
        table.add_column(header, justify="right" if numeric else "left", no_wrap=True)
    for r in rows:
        cells = _cells(r)
        table.add_row(*(cells[n] for n in names))
    return table


def print_runs(console: Console, rows: list[dict[str, Any]], results: Path) -> None:
    """Print the runs table, leaving out optional columns that do not fit the terminal."""
    wide = console.options.update_width(100_000)
    for count in range(len(OPTIONAL_COLUMNS) + 1):
        drop = OPTIONAL_COLUMNS[:count]
        table = runs_table(rows, results, drop=drop)
        if console.measure(table, options=wide).maximum <= console.width:
            break
    console.print(table)
    if "path" in drop:
        # soft_wrap: a long path stays one line that copies and pastes whole.
        console.print(
            f"run directories: {Path(results).resolve()}/<id>", highlight=False, soft_wrap=True
        )


def runs(
    results: Annotated[
        Path, typer.Option("--results", help="Results directory to list runs from.")
    ] = Path("tilemark-results"),
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the runs as a JSON list (newest first), not a table."),
    ] = False,
) -> None:
    """List stored runs, newest first."""
    # A StoreError (catalog held by another process) reaches tilemark.cli.main, which
    # prints it as one sentence with a non-zero exit like every other command's errors.
    rows = list_runs(results)
    if json_out:
        typer.echo(json.dumps(rows, indent=2))
        return
    if not rows:
        typer.echo(f"no runs under {results}")
        return
    print_runs(Console(), rows, results)
