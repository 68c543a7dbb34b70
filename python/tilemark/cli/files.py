"""`tilemark files`: file sets and file/metadata workloads (docs/files.md). The work is in
tilemark.files; this module parses options and prints the typed results."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from tilemark.files.fileset import PreparedSet
    from tilemark.files.run import FileRunResult
    from tilemark.files.spec import FileWorkload

files_app = typer.Typer(
    help="File sets and file/metadata workloads: prepare a set, run its streams (docs/files.md).",
    no_args_is_help=True,
    add_completion=False,
)

WorkloadArg = Annotated[
    str,
    typer.Argument(
        metavar="WORKLOAD",
        help="TOML file with [[fileset]] and [[filestream]], a fio job file of file and "
        "directory engines (*.fio), or varmail, webserver, fileserver, build.",
    ),
]
DirOption = Annotated[
    str | None,
    typer.Option(
        "--dir", metavar="DIR", help="Make every file set in DIR/<set name> (DIR must exist)."
    ),
]


@files_app.callback()
def _files() -> None:
    """File sets and file/metadata workloads: prepare a set, run its streams (docs/files.md)."""


def _prepared_line(p: PreparedSet) -> str:
    from tilemark.units import format_size

    how = "reused" if p.reused and not (p.created or p.rewritten or p.removed) else "prepared"
    dirs = f"{len(p.dirs):,} director{'y' if len(p.dirs) == 1 else 'ies'}"
    entries = (
        f"{p.entry_dirs:,} empty directories as entries"
        if p.spec.kind == "dirs"
        else f"{p.files:,} files, {format_size(p.bytes)}"
    )
    return (
        f"fileset {p.spec.name}: {how} {p.spec.path}: {entries} in {dirs} ({p.created:,} created, "
        f"{p.rewritten:,} rewritten, {p.removed:,} removed) in {p.seconds:.2f} s"
    )


@files_app.command("prepare", no_args_is_help=True)
def files_prepare(workload: WorkloadArg, directory: DirOption = None) -> None:
    """Create the workload's file sets (or make tilemark's existing ones match again)."""
    from tilemark.files.run import load_file_workload, lock_sets, prepare_all

    w = load_file_workload(workload, directory)
    with lock_sets(w):
        prepared = prepare_all(w, _progress())
    for p in prepared:
        typer.echo(_prepared_line(p))


def _progress():
    """A progress callback: files written so far, on stderr, at most twice a second."""
    import time

    last = [time.monotonic()]

    def show(name: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done == total and total >= 10_000:
            last[0] = now
            typer.echo(f"fileset {name}: {done:,} of {total:,} files written", err=True)

    return show


@files_app.command("run", no_args_is_help=True)
def files_run(
    workload: WorkloadArg,
    directory: DirOption = None,
    duration: Annotated[
        str | None, typer.Option("--duration", help="Run time, e.g. 10s (default: the file's).")
    ] = None,
    backend: Annotated[
        str | None,
        typer.Option(
            "--backend", help="psync (a thread per client) or uring (one thread per stream)."
        ),
    ] = None,
    json_out: Annotated[
        Path | None,
        typer.Option("--json", metavar="FILE", help="Also write the result (and intervals)."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="Replace FILE even if tilemark did not write it.")
    ] = False,
    results: Annotated[
        Path,
        typer.Option(
            "--results", metavar="DIR", help="Results directory: the run is stored there."
        ),
    ] = Path("tilemark-results"),
) -> None:
    """Prepare the file sets, run the file streams, print every operation's rate and latency;
    the run is stored (tilemark runs, report, compare)."""
    import dataclasses

    from tilemark.files.run import load_file_workload
    from tilemark.units import parse_duration

    notes: list[str] = []
    w = load_file_workload(workload, directory, notes)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if duration is not None:
        w = dataclasses.replace(w, duration_s=parse_duration(duration, "--duration"))
    if backend is not None:
        from tilemark.errors import UsageError
        from tilemark.files.spec import BACKENDS

        if backend not in BACKENDS:
            raise UsageError(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}.")
        w = dataclasses.replace(w, backend=backend)
    _run_and_print(w, json_out, force, results)


def run_fio_file_jobs(job_file: Path, values: dict) -> bool:
    """`tilemark run JOB.fio` of fio's file and directory engines: run it as `tilemark files
    run JOB.fio` does (the sets in fio's `directory`, or the current directory); --duration
    carries over, --json prints the result's JSON on stdout. False when the job file holds
    jobs of IO engines (a block workload)."""
    import dataclasses

    from tilemark.cli.params import given_options
    from tilemark.errors import UsageError
    from tilemark.fio.fileengines import is_file_job_file
    from tilemark.options import RUN
    from tilemark.units import parse_duration

    if not is_file_job_file(job_file):
        return False
    for o in given_options(values, {RUN}):
        if o.param not in ("duration", "json_out", "results"):
            raise UsageError(
                f"{o.flag} applies to block workloads; {job_file} holds jobs of fio's file and "
                f"directory engines, which run as a file workload (`tilemark files run "
                f"{job_file}` also takes --dir and --backend)."
            )
    notes: list[str] = []
    from tilemark.files.run import load_file_workload

    w = load_file_workload(str(job_file), None, notes)
    for note in notes:
        typer.echo(f"note: {note}", err=True)
    if values.get("duration"):
        w = dataclasses.replace(w, duration_s=parse_duration(values["duration"], "--duration"))
    results = Path(values.get("results") or "tilemark-results")
    _run_and_print(w, None, False, results, json_stdout=bool(values.get("json_out")))
    return True


def _run_and_print(
    w: FileWorkload,
    json_out: Path | None,
    force: bool,
    results: Path,
    *,
    json_stdout: bool = False,
) -> None:
    """Run a file workload, print its tables (on stderr with `json_stdout`, the JSON on
    stdout), store the run under `results`, write --json, and exit as the run ended."""
    from tilemark.errors import RunError
    from tilemark.files.run import run_file_workload

    result = run_file_workload(w, progress=_progress())
    for p in result.prepared:
        typer.echo(_prepared_line(p), err=json_stdout)
    _print_result(result, stderr=json_stdout)
    if result.plan is not None:
        import sys

        from tilemark.files.store import store_file_run

        run_id, run_dir, catalog_error = store_file_run(
            result, result.plan, w.backend, results, list(sys.argv)
        )
        typer.echo(f"run {run_id} stored in {run_dir}", err=json_stdout)
        if catalog_error:
            typer.echo(f"note: the catalog could not take the run now: {catalog_error}", err=True)
    if json_stdout:
        typer.echo(json.dumps(result.to_json(), indent=2))
    if json_out is not None:
        from tilemark.store.outputs import starts_with, write_file

        write_file(
            json_out, json.dumps(result.to_json(), indent=2), force=force, what="--json",
            ours=starts_with(b'{\n  "tilemark_file_run": 1'),
        )  # fmt: skip
    if result.status in ("errors", "hung"):
        raise RunError(f"file workload {w.name} stopped: {result.error}.")
    if result.status == "interrupted":
        typer.echo(f"interrupted: the run stopped after {result.seconds:.1f} s", err=True)
        raise typer.Exit(result.exit_status or 130)


def _print_result(r: FileRunResult, stderr: bool = False) -> None:
    from rich import box
    from rich.table import Table

    from tilemark.console import make_console
    from tilemark.units import format_size

    def us(v: float | None) -> str:
        return "-" if v is None else f"{v:,.1f}"

    console = make_console(stderr=stderr)
    for s in r.streams:
        t = Table(box=box.SIMPLE, title=f"{s.name} on {s.fileset} ({r.seconds:.1f} s, {r.status})")
        for col in ("op", "ops", "ops/s", "bytes", "mean us", "p50 us", "p99 us", "max us"):
            t.add_column(col, justify="left" if col == "op" else "right")
        t.add_column("skipped", justify="right")
        t.add_column("errors")
        for o in s.ops:
            if not (o.ops or o.skipped or o.errors):
                continue
            t.add_row(
                o.op, f"{o.ops:,}", f"{o.rate:,.1f}", format_size(o.bytes), us(o.mean_us),
                us(o.p50_us), us(o.p99_us), us(o.max_us), f"{o.skipped:,}",
                ", ".join(f"{k} {v}" for k, v in o.errors.items()),
            )  # fmt: skip
        console.print(t)
        if s.loops:
            console.print(
                f"{s.name}: {s.loops:,} {s.unit}, {s.loop_rate:,.1f} {s.unit}/s, p99 "
                f"{us(s.loop_p99_us)} us",
                markup=False,
            )
    for f in r.filesets:
        console.print(
            f"fileset {f.name} after the run: {f.files:,} files, {format_size(f.bytes)}"
            + (f", {f.dirs:,} directories (entries)" if f.dirs else ""),
            markup=False,
        )
    for d in r.devices:

        def fig(v: float | None, fmt: str) -> str:
            return "-" if v is None else format(v, fmt)

        console.print(
            f"device {d.name} ({d.dev}) under {', '.join(d.filesets)}: "
            f"{fig(d.write_iops, ',.0f')} writes/s of {fig(d.write_kib_avg, ',.1f')} KiB, "
            f"{fig(d.write_mbps, ',.1f')} MB/s, {fig(d.flushes_s, ',.0f')} flushes/s, "
            f"w_await {fig(d.w_await_ms, ',.2f')} ms, {fig(d.read_iops, ',.0f')} reads/s, "
            f"util {fig(d.util_pct, '.0f')}%",
            markup=False,
        )
    for line in filesystem_lines(r):
        console.print(line, markup=False)
    for v in r.qos:
        shown = "-" if v.value is None else f"{v.value:,.3f}"
        unit = "/s" if "rate" in v.criterion else " ms"
        ci = ""
        if v.ci_low is not None and v.ci_high is not None and v.ci_low != v.ci_high:
            ci = f", 95% CI {v.ci_low:,.3f}-{v.ci_high:,.3f}{unit}"
        state = "inconclusive" if v.decision == "inconclusive" else "pass" if v.passed else "FAIL"
        console.print(
            f"qos {v.name}: {state}: {v.criterion} (measured "
            f"{shown}{unit if v.value is not None else ''}{ci})",
            markup=False,
        )


WRITING_OPS = ("append", "write")


def filesystem_lines(r: FileRunResult) -> list[str]:
    """One line per file system beneath the sets with its own figures (files/fsstats.py); where
    it counts the bytes it wrote, their ratio to what the streams wrote (write amplification:
    journal, metadata, allocation)."""
    lines = []
    for f in r.filesystems:
        sets = set(f.filesets)
        written = sum(
            o.bytes for s in r.streams if s.fileset in sets for o in s.ops if o.op in WRITING_OPS
        )
        figures = ", ".join(f"{x.name} {x.value:,.1f}" for x in f.figures)
        if f.written_bytes is not None and written:
            figures += f", {f.written_bytes / written:.2f}x what the streams wrote"
        where = f"file system {f.fstype} at {f.mount} under {', '.join(f.filesets)}"
        lines.append(f"{where}: {figures}")
    return lines
