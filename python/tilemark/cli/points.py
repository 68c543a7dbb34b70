"""`tilemark sweep`, `tilemark matrix` and `tilemark curve`: studies of one workload's
parameters on one target.

Each parses its options, runs the study (commands/points.py) and prints its tables; study.json,
CSV files and the report are written in `<results>/studies/<id>/`. Exit status: 0 done, 2 bad
input (nothing written), 3 when `curve --slo` finds no rate that meets the objective, 1 when a
run failed, 128 + signal when interrupted (the points so far are kept).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tilemark.cli.common import EXIT_QOS, argv_of, consoles
from tilemark.cli.params import check_mode, table_command
from tilemark.cli.scale import write_study_report
from tilemark.commands import Interrupted
from tilemark.commands import points as points_command
from tilemark.console import say
from tilemark.options import CURVE, MATRIX, SWEEP, Option
from tilemark.options.typed import Options
from tilemark.study.base import Attempt, StepRecord, StepSpec, StudyOutcome
from tilemark.telemetry.sampler import tool_bound_line
from tilemark.units import MAX_IOPS, format_size


class _Progress:
    """One line as each point starts and one with what it measured (stderr)."""

    def __init__(self, console: Console, kind: str, total: int | None):
        self.console = console
        self.kind = kind
        self.total = total
        self.n = 0

    def starting(self, spec: StepSpec, reason: str, repeat: int, attempt: int) -> None:
        self.n += 1
        of = f"/{self.total}" if self.total else ""
        why = f" (run {attempt}: confirming a failure)" if attempt > 1 else ""
        self.console.print(f"{self.kind} {self.n}{of}: {spec.label}{why}", markup=False)

    def finished(self, step: StepRecord, attempt: Attempt) -> None:
        groups = attempt.detail.get("groups") or {}
        parts = []
        for name, g in groups.items():
            if not g.get("ios"):
                continue
            p99 = g.get("p99_ms")
            parts.append(
                f"{name} {g['iops']:,.0f} IOPS {g['mbps']:,.1f} MB/s p99 "
                f"{'-' if p99 is None else f'{p99:.3g}'} ms"
            )
        device = attempt.detail.get("device") or {}
        if device.get("device_iops") is not None:
            parts.append(
                f"devices {device['device_iops']:,.0f} IOPS {device['device_util']:.0f}% util"
            )
        verdict = attempt.detail.get("slo_verdict")
        tail = f"; SLO {verdict}" if verdict else ""
        self.console.print("  " + ("; ".join(parts) or "no IO completed") + tail, markup=False)
        bound = tool_bound_line(attempt.detail.get("tool_bound"))
        if bound is not None:
            self.console.print(f"  {bound}", markup=False)


def _finish(
    outcome: StudyOutcome,
    opts: Options,
    out: Console,
    err: Console,
    tables: list[Table],
    lines: list[str],
    json_body: dict[str, Any],
) -> None:
    doc, path, interrupted = outcome.doc, outcome.path, outcome.interrupted
    if interrupted is not None:
        why = "a run failed" if interrupted == 1 else "interrupted"
        err.print(f"{why}: the study so far is kept, marked incomplete", markup=False)
    if opts.output.json:
        body = {"study_id": doc["study_id"], "study_dir": str(path.resolve()), **json_body}
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    for t in tables:
        out.print(t)
    for line in lines + _tool_bound_lines(doc):
        say(out, line)
    out.print(f"study: {path}", markup=False)
    if opts.output.report and doc.get("steps"):
        write_study_report(path, opts.output.results, err, out)
    if interrupted is not None:
        raise typer.Exit(interrupted)


def _titled(doc: dict[str, Any], title: str) -> str:
    """A table title headed by the study's --label."""
    return f"{doc['label']}: {title}" if doc.get("label") else title


def _tool_bound_lines(doc: dict[str, Any]) -> list[str]:
    """Points whose run measured the host rather than the storage (telemetry.tool_bound)."""
    bound = [i for i, p in enumerate(doc.get("points") or [], 1) if p.get("tool_bound")]
    if not bound:
        return []
    return [
        f"note: point(s) {', '.join(map(str, bound))} were tool-bound (host CPU or the engine's "
        "schedule): their numbers describe the host, not the storage"
    ]


def _num(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _ms(v: float | None) -> str:
    return "-" if v is None else f"{v:.3g}"


def _clash(mode: str) -> Callable[[Option], str]:
    return lambda o: f"{o.flag} does not apply to {mode}."


# -----------------------------------------------------------------------------------------------
# sweep


def sweep_table(doc: dict[str, Any]) -> Table:
    """The seed-001 table: per point IOPS, MB/s, latency, and what the devices did."""
    t = Table(title=_titled(doc, f"sweep {doc['study_id']}"), title_justify="left")
    for c in ("point", "IO size", "QD", "read %", "region", "IOPS", "MB/s", "p50 ms", "p99 ms",
              "device IOPS", "device util %"):  # fmt: skip
        t.add_column(c, justify="left" if c in ("region",) else "right")
    for i, p in enumerate(doc.get("points") or [], 1):
        t.add_row(
            str(i),
            format_size(p["bs"]),
            str(p["qd"]),
            f"{p['read']:g}",
            p["region"],
            _num(p["iops"]),
            _num(p["mbps"], 1),
            _ms(p["p50_ms"]),
            _ms(p["p99_ms"]),
            _num(p["device_iops"]),
            _num(p["device_util"], 1),
        )
    return t


# -----------------------------------------------------------------------------------------------
# matrix


def matrix_tables(doc: dict[str, Any]) -> list[Table]:
    """Orion's three matrices: rows are large streams, columns small outstanding IOs."""
    out = []
    for name, title, digits in (
        ("small_iops", "small IOPS", 0),
        ("large_mbps", "large MB/s", 1),
        ("small_latency_ms", "small latency (mean ms)", 3),
    ):
        t = Table(title=_titled(doc, f"matrix {doc['study_id']}: {title}"), title_justify="left")
        t.add_column("large \\ small QD", justify="right")
        for q in doc.get("small_levels") or []:
            t.add_column(str(q), justify="right")
        for n, row in zip(doc.get("large_levels") or [], doc.get(name) or [], strict=False):
            cells = [_ms(v) if digits == 3 else _num(v, digits) for v in row]
            t.add_row(str(n), *cells)
        out.append(t)
    return out


# -----------------------------------------------------------------------------------------------
# curve


def curve_table(doc: dict[str, Any]) -> Table:
    t = Table(title=_titled(doc, f"curve {doc['study_id']}"), title_justify="left")
    for c in ("step", "phase", "QD", "offered %", "offered IOPS", "IOPS", "p50 ms", "p99 ms",
              "p99.9 ms", "SLO", "device IOPS", "device util %"):  # fmt: skip
        t.add_column(c, justify="left" if c in ("phase", "SLO") else "right")
    for i, p in enumerate(doc.get("points") or [], 1):
        t.add_row(
            str(i),
            {"max": "closed loop", "load": "offered load", "slo": "SLO search"}[p["phase"]],
            str(p["qd"]),
            "-" if p["offered_pct"] is None else f"{p['offered_pct']:.4g}",
            _num(p["offered_iops"]),
            _num(p["iops"]),
            _ms(p["p50_ms"]),
            _ms(p["p99_ms"]),
            _ms(p["p999_ms"]),
            p["verdict"] or "-",
            _num(p.get("device_iops")),
            _num(p.get("device_util"), 1),
        )
    return t


def curve_lines(doc: dict[str, Any]) -> list[str]:
    lines = []
    if doc.get("max_iops") is not None:
        lines.append(f"max IOPS: {doc['max_iops']:,.0f} (closed loop, QD{doc['qd_at_max']})")
    knee = doc.get("knee")
    if knee:
        lines.append(
            f"knee: from {knee['offered_pct']:.4g}% of max ({knee['iops']:,.0f} IOPS) on, p99 "
            f"({knee['p99_ms']:.3g} ms there) stays over 2x its {knee['base_p99_ms']:.3g} ms at "
            f"{knee['base_offered_pct']:.4g}%"
        )
    skipped = doc.get("loads_skipped_pct") or []
    if skipped:
        lines.append(
            f"note: loads {', '.join(f'{p:g}%' for p in skipped)} were skipped: above the "
            f"{MAX_IOPS:,.0f} IOs/s one stream can schedule"
        )
    if doc.get("slo"):
        if doc.get("slo_iops") is None:
            lines.append(f"no offered rate meets {doc['slo']}")
        else:
            limited = (
                " (every load met it; the highest load is the answer)"
                if doc.get("slo_limited_by_loads")
                else ""
            )
            lines.append(f"{doc['slo_iops']:,.0f} IOPS at {doc['slo']}{limited}")
    return lines


def _command(mode: str) -> Callable[[typer.Context, dict[str, Any]], None]:
    """The typer body of sweep, matrix or curve: check, type the options, run, print."""

    def body(ctx: typer.Context, values: dict[str, Any]) -> None:
        check_mode(values, mode, {mode}, _clash(mode))
        opts = Options.from_values(values, mode)
        out, err = consoles(opts.output.json)
        try:
            outcome = points_command.COMMANDS[mode](
                opts,
                argv=argv_of(ctx),
                console=err,
                progress=lambda total: _Progress(err, mode, total),
            )
        except Interrupted as e:
            raise typer.Exit(e.status) from None
        PRINTERS[mode](outcome, opts, out, err)

    return body


def _print_sweep(outcome: StudyOutcome, opts: Options, out: Console, err: Console) -> None:
    fields = (
        "bs", "qd", "read", "region", "iops", "mbps", "p50_ms", "p99_ms", "device_iops",
        "device_util",
    )  # fmt: skip
    points = [{k: p.get(k) for k in fields} for p in outcome.doc.get("points") or []]
    _finish(outcome, opts, out, err, [sweep_table(outcome.doc)], [], {"points": points})


def _print_matrix(outcome: StudyOutcome, opts: Options, out: Console, err: Console) -> None:
    keys = ("small_levels", "large_levels", "small_iops", "large_mbps", "small_latency_ms")
    doc = outcome.doc
    _finish(outcome, opts, out, err, matrix_tables(doc), [], {k: doc.get(k) for k in keys})


def _print_curve(outcome: StudyOutcome, opts: Options, out: Console, err: Console) -> None:
    doc = outcome.doc
    fields = ("phase", "qd", "offered_pct", "offered_iops", "iops", "p50_ms", "p99_ms", "p999_ms",
              "verdict")  # fmt: skip
    body = {
        "max_iops": doc.get("max_iops"),
        "qd_at_max": doc.get("qd_at_max"),
        "slo": doc.get("slo"),
        "slo_iops": doc.get("slo_iops"),
        "knee": doc.get("knee"),
        "points": [{k: p[k] for k in fields} for p in doc.get("points") or []],
    }
    _finish(outcome, opts, out, err, [curve_table(doc)], curve_lines(doc), body)
    if doc.get("slo") and doc.get("slo_iops") is None and outcome.interrupted is None:
        raise typer.Exit(EXIT_QOS)


PRINTERS = {SWEEP: _print_sweep, MATRIX: _print_matrix, CURVE: _print_curve}


sweep = table_command(
    "sweep",
    "Sweep one stream's IO size, queue depth, read % and region (Cartesian product).",
    {SWEEP},
    _command(SWEEP),
)
matrix = table_command(
    "matrix",
    "Orion's matrix: small random IOs at outstanding-IO levels x large sequential streams.",
    {MATRIX},
    _command(MATRIX),
)
curve = table_command(
    "curve",
    "The load/latency curve: the maximum IOPS, then offered loads up to 110% of it.",
    {CURVE},
    _command(CURVE),
)
