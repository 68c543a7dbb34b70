"""`tilemark studies`: list the studies stored under a results directory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tilemark.cli.listing import listed_plainly
from tilemark.cli.runs import (
    STATUS_STYLES,
    columns_shown,
    label_under_id,
    listing_table,
    print_fitted,
)
from tilemark.console import make_console
from tilemark.options.typed import DEFAULT_RESULTS
from tilemark.store.studies import list_studies
from tilemark.wording import counted

COLUMNS = ("id", "kind", "label", "started", "tile", "steps", "result", "status")
OPTIONAL_COLUMNS = ("path", "started", "tile", "label")


def _result(r: dict[str, Any]) -> str:
    """The study's answer: the largest passing tile count, or knob value; a repeat study's
    verdict."""
    if r.get("kind") == "repeat":
        return r.get("verdict") or "no verdict"
    caveat = r.get("answer") and "(" in r["answer"]  # the range's top, inconclusive, host-bound
    if r.get("knob"):
        best = r.get("max_passing_value")
        if best is None:
            return f"no {r['knob']} passed"
        return f"max {r['knob']}: {r['answer']}" if caveat else f"max {r['knob']}={best:g}"
    if r.get("kind") == "scale" or r.get("max_passing_tiles") is not None:
        best = r.get("max_passing_tiles")
        if best is None:
            return "no tile count passed"
        return f"max tiles: {r['answer']}" if caveat else f"max {counted(best, 'tile')}"
    if r.get("kind") in ("sweep", "matrix"):
        return counted(r.get("points_measured") or 0, "point")
    if r.get("kind") == "curve" and r.get("max_iops") is not None:
        slo = f", {r['slo_iops']:,.0f} at {r['slo']}" if r.get("slo_iops") is not None else ""
        return f"max {r['max_iops']:,.0f} IOPS{slo}"
    return "-"


def _cells(r: dict[str, Any]) -> dict[str, str]:
    status = r.get("status") or "-"
    steps = r.get("steps")
    missing = r.get("steps_missing") or 0
    return {
        "id": r["study_id"],
        "kind": r.get("kind") or "-",
        "label": escape(r.get("label") or ""),
        "started": (r.get("started_at") or "-").replace("T", " ")[:19],
        "tile": str(r.get("tile") or "-"),
        "steps": "-" if steps is None else f"{steps}" + (f" ({missing} gone)" if missing else ""),
        "result": _result(r) if r.get("status") != "damaged" else "-",
        "status": f"[{STATUS_STYLES.get(status, 'cyan')}]{status}[/]",
        "path": r.get("path") or "-",
    }


def studies_table(rows: list[dict[str, Any]], results: Path, *, drop: tuple[str, ...]) -> Table:
    """A rich table of studies, without the `drop` columns."""
    names = columns_shown(COLUMNS, rows, drop)
    cells = label_under_id([_cells(r) for r in rows], rows, drop)
    return listing_table(f"studies under {results}", names, cells, ("steps",))


def studies(
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print the studies as a JSON list (newest first).")
    ] = False,
) -> None:
    """List stored studies, newest first: kind, steps, result, status."""
    rows = list_studies(results)
    if listed_plainly(rows, json_out, f"no studies under {results}"):
        return
    console = make_console(stderr=False)
    drop = print_fitted(console, lambda d: studies_table(rows, results, drop=d), OPTIONAL_COLUMNS)
    if "path" in drop:
        base = (Path(results) / "studies").resolve()
        console.print(f"study directories: {base}/<id>", highlight=False, soft_wrap=True)
    for r in rows:
        if r.get("problem"):
            console.print(f"{r['study_id']} damaged: {r['problem']}", markup=False, soft_wrap=True)
