"""`tilemark runs`: list the runs stored under a results directory; `runs rm` and `runs prune`
delete them (run directory and catalog row together)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tilemark.cli.listing import listed_plainly
from tilemark.console import make_console
from tilemark.errors import UsageError
from tilemark.options.typed import DEFAULT_RESULTS
from tilemark.store import catalog
from tilemark.store.catalog import list_runs
from tilemark.store.studies import steps_of_studies
from tilemark.units import format_size
from tilemark.wording import counted

if TYPE_CHECKING:  # rm and prune load the deleting code; listing does not
    from tilemark.store.manage import Candidate

ResultsOpt = Annotated[
    Path | None,
    typer.Option("--results", metavar="DIR", help="Results directory (default tilemark-results)."),
]


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


# What produced a run, in a word: `tilemark run`, `run --tiles`, a step of a study.
KIND_LABELS = {"run": "run", "tiles": "tiles", "scale-step": "step"}
STATUS_STYLES = {
    "complete": "green",
    "incomplete": "yellow",
    "errors": "red",
    "hung": "red",
    "data-errors": "red",
    "failed": "red",
    "killed": "red",
    "damaged": "magenta",
}
COLUMNS = (
    "id",
    "kind",
    "label",
    "started",
    "status",
    "backend",
    "streams",
    "duration",
    "IOPS",
    "MB/s",
    "errors",
)
# Dropped in this order when the terminal is too narrow: the run directory is results/<id>,
# the id itself starts with the UTC start time, and `--json` has everything.
OPTIONAL_COLUMNS = ("path", "started", "backend", "streams", "label")
NUMERIC = ("streams", "duration", "IOPS", "MB/s", "errors")
# A label is cut to this width (with an ellipsis) so the table keeps to 80 columns.
LABEL_WIDTH = 16
MAX_NOTES = 5


def kind_label(kind: str | None) -> str:
    """run, tiles or step; '-' when unknown (a run whose run.json cannot be read)."""
    if not kind:
        return "-"
    return KIND_LABELS.get(kind, "step" if kind.endswith("-step") else kind)


def _cells(r: dict[str, Any]) -> dict[str, str]:
    status = r.get("status") or "-"
    errors = r.get("errors")
    return {
        "id": r["run_id"],
        "kind": kind_label(r.get("kind")),
        "label": escape(r.get("label") or ""),
        "started": _started(r.get("started_at")),
        "status": f"[{STATUS_STYLES.get(status, 'cyan')}]{status}[/]",
        "backend": r.get("backend") or "-",
        "streams": _number(r.get("streams")),
        "duration": _duration(r.get("duration_s")),
        "IOPS": _number(r.get("total_iops")),
        "MB/s": _number(r.get("total_mbps")),
        "errors": "-" if errors is None else (f"[red]{errors:,}[/]" if errors else "0"),
        "path": r.get("path") or "-",
    }


def listing_table(
    title: str, names: list[str], rows: list[dict[str, str]], right: tuple[str, ...]
) -> Table:
    """A compact rich table of `rows` (cells by column name) in the `names` columns."""
    table = Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_edge=False,
        pad_edge=False,
        collapse_padding=True,
    )
    for name in names:
        header = "started (UTC)" if name == "started" else name
        table.add_column(
            header,
            justify="right" if name in right else "left",
            no_wrap=True,
            max_width=LABEL_WIDTH if name == "label" else None,
            overflow="ellipsis" if name == "label" else "fold",
        )
    for cells in rows:
        table.add_row(*(cells[n] for n in names))
    return table


def runs_table(rows: list[dict[str, Any]], results: Path, *, drop: tuple[str, ...] = ()) -> Table:
    """A rich table of catalog rows (newest first as given), without the `drop` columns."""
    names = columns_shown(COLUMNS, rows, drop)
    cells = label_under_id([_cells(r) for r in rows], rows, drop)
    return listing_table(f"runs under {results}", names, cells, NUMERIC)


def columns_shown(columns: tuple[str, ...], rows: list[dict[str, Any]], drop: tuple[str, ...]):
    """The columns of a listing: without `drop`, and without a label column nobody uses."""
    if not any(r.get("label") for r in rows):
        drop = (*drop, "label")
    return [n for n in (*columns, "path") if n not in drop]


def label_under_id(
    cells: list[dict[str, str]], rows: list[dict[str, Any]], drop: tuple[str, ...]
) -> list[dict[str, str]]:
    """On narrow terminals (label column dropped) the label goes under the id."""
    if "label" in drop:
        for c, r in zip(cells, rows, strict=True):
            if r.get("label"):
                label = r["label"] if len(r["label"]) <= 20 else r["label"][:19] + "…"
                c["id"] += f"\n[dim]{escape(label)}[/]"
    return cells


def print_fitted(
    console: Console, make: Callable[[tuple[str, ...]], Table], optional: tuple[str, ...]
) -> tuple[str, ...]:
    """Print make(drop) with as few of the optional columns dropped (in order) as the terminal
    needs; the columns dropped."""
    wide = console.options.update_width(100_000)
    for count in range(len(optional) + 1):
        drop = optional[:count]
        table = make(drop)
        if console.measure(table, options=wide).maximum <= console.width:
            break
    console.print(table)
    return drop


def print_runs(console: Console, rows: list[dict[str, Any]], results: Path) -> None:
    """Print the runs table, leaving out optional columns that do not fit the terminal, and
    say why runs were killed, damaged or failed."""
    drop = print_fitted(console, lambda d: runs_table(rows, results, drop=d), OPTIONAL_COLUMNS)
    if "path" in drop:
        # soft_wrap: a long path stays one line that copies and pastes whole.
        console.print(
            f"run directories: {Path(results).resolve()}/<id>", highlight=False, soft_wrap=True
        )
    noted = [r for r in rows if r.get("problem") and r.get("status") != "complete"]
    for r in noted[:MAX_NOTES]:
        console.print(f"{r['run_id']} {r['status']}: {r['problem']}", markup=False, soft_wrap=True)
    if len(noted) > MAX_NOTES:
        console.print(
            f"... and {len(noted) - MAX_NOTES} more; `tilemark runs --json` has every problem",
            markup=False,
        )


runs_app = typer.Typer(
    help="List stored runs, newest first; `runs rm` and `runs prune` delete runs.",
    rich_markup_mode=None,
    add_completion=False,
)


def _root(ctx: typer.Context, results: Path | None) -> Path:
    """--results of the subcommand, else of `tilemark runs`, else the default."""
    if results is not None:
        return results
    parent = ctx.parent.params.get("results") if ctx.parent is not None else None
    return parent if parent is not None else DEFAULT_RESULTS


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    results: ResultsOpt = None,
    json_out: Annotated[
        bool,
        typer.Option("--json", help="Print the runs as a JSON list (newest first), not a table."),
    ] = False,
) -> None:
    """List stored runs, newest first; `runs rm` and `runs prune` delete runs."""
    if ctx.invoked_subcommand is not None:
        return
    root = results if results is not None else DEFAULT_RESULTS
    # A StoreError (catalog held by another process) reaches tilemark.cli.main, which
    # prints it as one sentence with a non-zero exit like every other command's errors.
    rows = list_runs(root)
    if not listed_plainly(rows, json_out, f"no runs under {root}"):
        print_runs(make_console(stderr=False), rows, root)


def _deletable_root(root: Path) -> None:
    if not root.is_dir():
        raise UsageError(f"--results {root} is not a directory.")
    catalog.check_catalog(root)
    if not catalog.writable(root):
        raise UsageError(f"--results {root} is read-only: no run can be deleted from it.")


def _report(candidates: list[Candidate], root: Path, *, dry_run: bool, note: str | None) -> None:
    studies = steps_of_studies(root)
    for c in candidates:
        state = c.state
        kind = kind_label((state.doc or {}).get("kind"))
        study = studies.get(c.run_id)
        typer.echo(
            f"{'would delete' if dry_run else 'deleted'} {c.run_id}: {kind}, {state.status}, "
            f"{format_size(c.size)}" + (f" (a step of study {study})" if study else "")
        )
    total = format_size(sum(c.size for c in candidates))
    if dry_run:
        typer.echo(f"{counted(len(candidates), 'run')}, {total}; nothing deleted (--dry-run)")
    else:
        typer.echo(f"deleted {counted(len(candidates), 'run')}, {total} freed")
    if note:
        typer.echo(f"note: {note}", err=True)


DryRunOpt = Annotated[
    bool, typer.Option("--dry-run", help="Say what would be deleted; delete nothing.")
]


@runs_app.command("rm", no_args_is_help=True)
def rm(
    ctx: typer.Context,
    ids: Annotated[
        list[str], typer.Argument(metavar="ID", help="Exact run ids, as `tilemark runs` shows.")
    ],
    results: ResultsOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Delete runs: their directories and catalog rows. Nothing is deleted if any id is
    unknown, still running, or holds files tilemark did not write."""
    root = _root(ctx, results)
    _deletable_root(root)
    from tilemark.store import manage

    chosen: dict[Path, manage.Candidate] = {}
    for name in ids:
        run_dir = manage.find_run(root, name)
        if run_dir.resolve() in chosen:
            continue
        candidate = manage.examine(run_dir)
        if candidate.refusal:
            raise UsageError(f"{candidate.refusal}; nothing was deleted.")
        chosen[run_dir.resolve()] = candidate
    _delete(list(chosen.values()), root, dry_run=dry_run)


def _delete(candidates: list[Candidate], root: Path, *, dry_run: bool) -> None:
    from tilemark.store import manage

    if dry_run:
        _report(candidates, root, dry_run=True, note=None)
        return
    done = manage.delete(root, candidates)
    _report(done.deleted, root, dry_run=False, note=done.note)
    if done.exit_status is not None:
        left = len(candidates) - len(done.deleted)
        typer.echo(f"interrupted: {counted(left, 'run')} not deleted", err=True)
        raise typer.Exit(done.exit_status)


@runs_app.command("prune", no_args_is_help=True)
def prune(
    ctx: typer.Context,
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="AGE",
            help="Delete runs started more than AGE ago: 30d, 12h, 90m, 2w.",
        ),
    ],
    results: ResultsOpt = None,
    dry_run: DryRunOpt = False,
) -> None:
    """Delete runs older than AGE (never one still running, never a directory holding files
    tilemark did not write)."""
    from tilemark.store import manage

    age = manage.parse_age(older_than)
    root = _root(ctx, results)
    _deletable_root(root)
    candidates = []
    for run_dir in manage.older_than(root, age):
        candidate = manage.examine(run_dir)
        if candidate.refusal:
            typer.echo(f"kept {candidate.run_id}: {candidate.refusal}")
            continue
        candidates.append(candidate)
    _delete(candidates, root, dry_run=dry_run)
