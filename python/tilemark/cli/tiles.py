"""`tilemark run --tiles N` and `tilemark scale`: how many tiles does this storage carry?

A scaling study runs tile counts in turn (or searches them), judges every application of every
tile against its QoS, and reports the largest count at which all of them pass. Every step is a
stored run; the study record (`<results>/studies/<id>/study.json`) links them.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tilemark import __version__, targets
from tilemark.analysis.tiles import DEFAULT_QOS_INTERVAL_S
from tilemark.apps import TileSpec, default_tile, load_tile, min_capacity, parse_sets
from tilemark.cli.options import CapacityOpt, QosIntervalOpt, SetOpt
from tilemark.cli.run import DEFAULT_RESULTS, report, write_json
from tilemark.errors import UsageError
from tilemark.runner import RunOutcome, make_console, prepare
from tilemark.tilerun import TileRunSettings, applications_table, run_tiles, tile_workload
from tilemark.units import format_size, parse_duration, parse_size

STUDY_SCHEMA_VERSION = 1
DEFAULT_TILE_DURATION = "60s"
DEFAULT_TILE_WARMUP = "10s"
MAX_TILES = 256


def _tile(tile_file: Path | None, sets: list[str]) -> TileSpec:
    overrides = parse_sets(sets)
    return load_tile(str(tile_file), overrides) if tile_file else default_tile(overrides)


def _settings(
    *,
    target: str | None,
    capacity: str | None,
    duration: str | None,
    warmup: str | None,
    interval: str | None,
    backend: str | None,
    threads: str | None,
    buffered: bool,
    seed: str | None,
    qos_interval: str | None,
) -> TileRunSettings:
    if not target:
        raise UsageError("--target is required: a file (created if missing) or a block device.")
    cap = parse_size(capacity, "--capacity") if capacity else targets.default_size(target)
    if cap <= 0:
        raise UsageError(f"--capacity must be above 0, got {capacity!r}.")
    duration_s = parse_duration(duration or DEFAULT_TILE_DURATION, "--duration")
    if duration_s <= 0:
        raise UsageError(f"--duration must be above 0, got {duration!r}.")
    if qos_interval is not None:
        qos_s = parse_duration(qos_interval, "--qos-interval")
        if qos_s <= 0:
            raise UsageError(f"--qos-interval must be above 0, got {qos_interval!r}.")
    else:
        # 60 s intervals (methodology 11.2), but at least four of them in a short run.
        qos_s = min(DEFAULT_QOS_INTERVAL_S, max(duration_s / 4, 1.0))
    settings = TileRunSettings(
        target=target,
        capacity=cap,
        duration=duration or DEFAULT_TILE_DURATION,
        warmup=warmup or DEFAULT_TILE_WARMUP,
        interval=interval or 1.0,
        backend=backend or "uring",
        direct=not buffered,
        qos_interval_s=qos_s,
    )
    if threads is not None:
        settings.threads = threads  # type: ignore[assignment]  # validated by parse_workload
    if seed is not None:
        settings.seed = seed  # type: ignore[assignment]
    return settings


def _inspect(
    tile: TileSpec, settings: TileRunSettings, max_tiles: int, destroy_data: str | None, force: bool
) -> targets.TargetInfo:
    """Check the layout fits --capacity, then inspect the target (safety checks)."""
    need = min_capacity(tile, max_tiles)
    if settings.capacity < need:
        raise UsageError(
            f"--capacity {format_size(settings.capacity)} is too small for {max_tiles} tile(s) "
            f"of {tile.name}: every application needs at least 1 MiB; use at least "
            f"{format_size(need)}."
        )
    return targets.inspect_target(
        settings.target,
        size=settings.capacity,
        writes=True,
        direct=settings.direct,
        destroy_data=destroy_data,
        force=force,
    )


def run_tiles_command(
    tiles: int,
    *,
    tile_file: Path | None,
    target: str | None,
    capacity: str | None,
    sets: list[str],
    qos_interval: str | None,
    duration: str | None,
    warmup: str | None,
    interval: str | None,
    backend: str | None,
    threads: str | None,
    buffered: bool,
    seed: str | None,
    destroy_data: str | None,
    force: bool,
    json_out: bool,
    results: Path,
    argv: list[str],
) -> int:
    """`tilemark run --tiles N`: one tile count, per-application results."""
    if not 1 <= tiles <= MAX_TILES:
        raise UsageError(f"--tiles must be from 1 to {MAX_TILES}, got {tiles}.")
    tile = _tile(tile_file, sets)
    settings = _settings(
        target=target,
        capacity=capacity,
        duration=duration,
        warmup=warmup,
        interval=interval,
        backend=backend,
        threads=threads,
        buffered=buffered,
        seed=seed,
        qos_interval=qos_interval,
    )
    info = _inspect(tile, settings, tiles, destroy_data, force)
    # Validate the whole plan before any IO.
    tile_workload(tile, tiles, settings, max_tiles=tiles, dio_alignment=info.dio_alignment)
    err = make_console(stderr=True)
    out = err if json_out else make_console(stderr=False)
    if not prepare(info, err):
        return 130
    outcome = run_tiles(
        tile, tiles, settings, info, max_tiles=tiles, results=results, argv=argv, console=err
    )
    apps = outcome.summary["applications"]
    if json_out:
        write_json(outcome, {"summary": _without_layout(outcome.summary)})
    report(outcome, out, err)
    out.print(applications_table(apps, f"{tiles} tile(s) of {tile.name}: applications"))
    out.print(_verdict_line(apps), markup=False)
    return outcome.exit_status or 0


def _without_layout(summary: dict) -> dict:
    apps = {k: v for k, v in summary["applications"].items() if k != "layout"}
    for inst in apps["instances"]:
        inst.pop("verdicts", None)
    return {**summary, "applications": apps}


def _verdict_line(apps: dict) -> str:
    score = f", score {apps['score']:.2f}" if apps["score"] is not None else ""
    if apps["passed"]:
        return f"QoS: every application in {apps['tiles']} tile(s) passes{score}"
    return f"QoS: FAIL{score} - " + "; ".join(apps["failed"])


# -----------------------------------------------------------------------------------------------
# tilemark scale


def parse_tile_counts(text: str) -> list[int]:
    """'1..8' -> [1..8]; '1,2,4' -> [1, 2, 4]; '4' -> [4]."""
    text = text.strip()
    m = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    if m:
        lo, hi = int(m[1]), int(m[2])
        counts = list(range(lo, hi + 1))
    elif re.fullmatch(r"\d+(\s*,\s*\d+)*", text):
        counts = sorted({int(x) for x in text.split(",")})
    else:
        raise UsageError(f"--tiles must be a range like 1..8 or a list like 1,2,4, got {text!r}.")
    if not counts:
        raise UsageError(f"--tiles range {text!r} is empty; write it low..high, e.g. 1..8.")
    if counts[0] < 1 or counts[-1] > MAX_TILES:
        raise UsageError(f"--tiles counts must be from 1 to {MAX_TILES}, got {text!r}.")
    return counts


@dataclass
class Step:
    """One tile count of a study and its stored run."""

    tiles: int
    run_id: str
    run_dir: str
    passed: bool
    complete: bool
    failed: list[str]
    score: float | None
    applications: list[dict]
    total: dict
    instances: list[dict] = field(default_factory=list)

    @classmethod
    def of(cls, tiles: int, outcome: RunOutcome) -> Step:
        apps = outcome.summary["applications"]
        return cls(
            tiles=tiles,
            run_id=outcome.run_id,
            run_dir=str(outcome.run_dir),
            passed=apps["passed"] and outcome.complete,
            complete=outcome.complete,
            failed=apps["failed"] if outcome.complete else ["run interrupted"],
            score=apps["score"],
            applications=apps["applications"],
            total=outcome.summary["total"],
            instances=[{k: v for k, v in i.items() if k != "verdicts"} for i in apps["instances"]],
        )


class Study:
    """Chooses the next tile count, linear or by search, from the verdicts so far."""

    def __init__(self, counts: list[int], *, search: bool, confirm: int):
        self.counts = counts
        self.search = search
        self.confirm = confirm
        self.steps: dict[int, Step] = {}

    def record(self, step: Step) -> None:
        self.steps[step.tiles] = step

    def next_count(self) -> int | None:
        return self._next_search() if self.search else self._next_linear()

    def _next_linear(self) -> int | None:
        fails_in_a_row = 0
        for n in self.counts:
            if n not in self.steps:
                return n
            fails_in_a_row = 0 if self.steps[n].passed else fails_in_a_row + 1
            if fails_in_a_row > self.confirm:
                return None
        return None

    def _next_search(self) -> int | None:
        # Doubling from the smallest count until a failure, then bisection between the last
        # pass and the first failure; candidates are restricted to the given counts.
        lo, hi = self.counts[0], self.counts[-1]
        passed = [n for n, s in self.steps.items() if s.passed]
        failed = [n for n, s in self.steps.items() if not s.passed]
        best = max(passed, default=None)
        worst = min((n for n in failed if best is None or n > best), default=None)
        if best is None:
            return None if lo in self.steps else lo
        if worst is None:
            if best >= hi:
                return None
            return self._nearest(min(best * 2, hi))
        candidates = [n for n in self.counts if best < n < worst and n not in self.steps]
        if not candidates:
            return None
        return candidates[len(candidates) // 2]

    def _nearest(self, n: int) -> int | None:
        options = [c for c in self.counts if c not in self.steps and c >= n]
        return options[0] if options else None

    def max_passing(self) -> int | None:
        passed = [n for n, s in self.steps.items() if s.passed]
        if not passed:
            return None
        if self.search:
            return max(passed)
        # Linear: the largest passing count below the confirmed failure.
        best = None
        fails_in_a_row = 0
        for n in self.counts:
            if n not in self.steps:
                break
            if self.steps[n].passed:
                best, fails_in_a_row = n, 0
            else:
                fails_in_a_row += 1
                if fails_in_a_row > self.confirm:
                    break
        return best


def scale(
    ctx: typer.Context,
    tile_file: Annotated[
        Path | None,
        typer.Argument(
            metavar="[TILE.toml]", help="Tile file (default: mail+oltp+dss+web+backup)."
        ),
    ] = None,
    target: Annotated[
        str | None, typer.Option("--target", metavar="PATH", help="File or block device.")
    ] = None,
    capacity: CapacityOpt = None,
    tiles: Annotated[
        str,
        typer.Option("--tiles", metavar="RANGE", help="Tile counts: 1..8 (default) or 1,2,4,8."),
    ] = "1..8",
    search: Annotated[
        bool,
        typer.Option(
            "--search", help="Find the largest passing count by doubling, then bisection."
        ),
    ] = False,
    confirm: Annotated[
        int,
        typer.Option(
            "--confirm",
            metavar="N",
            help="Linear mode: failing counts in a row after the first that end the study.",
        ),
    ] = 1,
    duration: Annotated[
        str | None,
        typer.Option("--duration", metavar="TIME", help="Measured time per step (default 60s)."),
    ] = None,
    warmup: Annotated[
        str | None, typer.Option("--warmup", metavar="TIME", help="Warm-up per step (default 10s).")
    ] = None,
    interval: Annotated[
        str | None,
        typer.Option("--interval", metavar="TIME", help="Snapshot interval (default 1s)."),
    ] = None,
    qos_interval: QosIntervalOpt = None,
    sets: SetOpt = None,
    backend: Annotated[
        str | None,
        typer.Option("--backend", metavar="NAME", help="uring (default), psync or null."),
    ] = None,
    threads: Annotated[
        str | None, typer.Option("--threads", metavar="N", help="Engine threads.")
    ] = None,
    buffered: Annotated[
        bool, typer.Option("--buffered", help="Use the page cache (no O_DIRECT).")
    ] = False,
    seed: Annotated[
        str | None, typer.Option("--seed", metavar="N", help="Run seed (default 1).")
    ] = None,
    destroy_data: Annotated[
        str | None,
        typer.Option("--destroy-data", metavar="PATH", help="Allow writing this block device."),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="With --destroy-data: write even if in use or signed.")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="Print only the study summary as JSON on stdout.")
    ] = False,
    write_report: Annotated[
        bool,
        typer.Option("--report/--no-report", help="Write report.html in the study directory."),
    ] = True,
    results: Annotated[
        Path, typer.Option("--results", metavar="DIR", help="Results directory.")
    ] = DEFAULT_RESULTS,
) -> None:
    """Add tiles until an application's QoS fails; report the largest passing tile count."""
    if confirm < 0:
        raise UsageError(f"--confirm must be 0 or more, got {confirm}.")
    if force and destroy_data is None:
        raise UsageError("--force only applies together with --destroy-data PATH.")
    counts = parse_tile_counts(tiles)
    tile = _tile(tile_file, sets or [])
    settings = _settings(
        target=target,
        capacity=capacity,
        duration=duration,
        warmup=warmup,
        interval=interval,
        backend=backend,
        threads=threads,
        buffered=buffered,
        seed=seed,
        qos_interval=qos_interval,
    )
    max_tiles = counts[-1]
    info = _inspect(tile, settings, max_tiles, destroy_data, force)
    for n in (counts[0], max_tiles):  # every step compiles if the extremes do
        tile_workload(tile, n, settings, max_tiles=max_tiles, dio_alignment=info.dio_alignment)
    argv = (ctx.obj or {}).get("argv") or ["tilemark", *sys.argv[1:]]
    err = make_console(stderr=True)
    out = err if json_out else make_console(stderr=False)
    if not prepare(info, err):
        raise typer.Exit(130)

    study = Study(counts, search=search, confirm=confirm)
    record = _StudyRecord(
        results, tile, settings, counts, search=search, confirm=confirm, argv=argv
    )
    status = 0
    while (n := study.next_count()) is not None:
        err.print(f"scale: {n} tile(s)", markup=False)
        outcome = run_tiles(
            tile,
            n,
            settings,
            info,
            max_tiles=max_tiles,
            results=results,
            argv=argv,
            console=err,
            kind="scale-step",
        )
        step = Step.of(n, outcome)
        study.record(step)
        record.save(study, complete=False)
        err.print(_verdict_line(outcome.summary["applications"]), markup=False)
        if outcome.exit_status is not None:
            status = outcome.exit_status
            err.print("interrupted: the study so far is kept, marked incomplete", markup=False)
            break
    doc = record.save(study, complete=status == 0)
    if json_out:
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    for table in study_tables(doc):
        out.print(table)
    for line in failure_lines(doc):
        out.print(line, markup=False)
    out.print(_headline(doc), markup=False)
    out.print(f"study: {record.path}", markup=False)
    if write_report and doc["steps"]:
        _write_report(record.path, results, err, out)
    if status:
        raise typer.Exit(status)


def _write_report(study_dir: Path, results: Path, err: Console, out: Console) -> None:
    """The study's HTML report; a failure here never loses the study, which is already saved."""
    from tilemark.report import REPORT_FILE, HtmlExporter, build_report
    from tilemark.report.data import load_source

    try:
        doc = build_report(load_source(str(study_dir), results))
        (path,) = HtmlExporter().export(doc, study_dir / REPORT_FILE)
    except Exception as e:  # the report is a view of stored data; say why and carry on
        err.print(
            f"note: the report could not be written ({e}); try `tilemark report {study_dir}`",
            markup=False,
        )
        return
    out.print(f"report: {path}", markup=False)


class _StudyRecord:
    """study.json, rewritten after every step so an interrupted study keeps its steps."""

    def __init__(
        self,
        results: Path,
        tile: TileSpec,
        settings: TileRunSettings,
        counts: list[int],
        *,
        search: bool,
        confirm: int,
        argv: list[str],
    ):
        self.study_id = time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(2)
        self.path = results / "studies" / self.study_id
        self.path.mkdir(parents=True, exist_ok=True)
        self.started_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self.base = {
            "schema_version": STUDY_SCHEMA_VERSION,
            "kind": "scale",
            "study_id": self.study_id,
            "tilemark_version": __version__,
            "argv": argv,
            "started_at": self.started_at,
            "tile": {
                "name": tile.name,
                "source": tile.source,
                "applications": [
                    {
                        "app": a.label,
                        "profile": a.profile.name,
                        "scale": a.profile.scale,
                        "qos": [c.__dict__ for c in a.profile.qos],
                    }
                    for a in tile.apps
                ],
            },
            "target": settings.target,
            "capacity": settings.capacity,
            "duration": settings.duration,
            "warmup": settings.warmup,
            "qos_interval_s": settings.qos_interval_s,
            "tile_counts": counts,
            "mode": "search" if search else "linear",
            "confirm": confirm,
        }

    def save(self, study: Study, *, complete: bool) -> dict[str, Any]:
        steps = [study.steps[n].__dict__ for n in sorted(study.steps)]
        best = study.max_passing()
        doc = {
            **self.base,
            "complete": complete,
            "ended_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "runs_used": len(steps),
            "max_passing_tiles": best,
            "score_at_max": study.steps[best].score if best is not None else None,
            "first_failure": next(
                ({"tiles": s["tiles"], "failed": s["failed"]} for s in steps if not s["passed"]),
                None,
            ),
            "steps": steps,
        }
        tmp = self.path / "study.json.tmp"
        tmp.write_text(json.dumps(doc, indent=2, default=_json_default))
        os.replace(tmp, self.path / "study.json")
        return doc


def _json_default(o: Any) -> Any:
    if isinstance(o, tuple | set):
        return list(o)
    raise TypeError(f"not JSON serializable: {type(o).__name__}")


def _headline(doc: dict) -> str:
    best = doc["max_passing_tiles"]
    used = f"{doc['runs_used']} run(s), {doc['mode']}"
    if best is None:
        first = doc["first_failure"]
        why = "; ".join(first["failed"]) if first else "no step completed"
        return f"no tile count passes QoS ({used}): {why}"
    score = f", score {doc['score_at_max']:.2f}" if doc["score_at_max"] is not None else ""
    return f"max passing tiles: {best}{score} ({used})"


def study_tables(doc: dict) -> list[Table]:
    """The seeds' tables: per tile count, each application's metric (summed over tiles), then
    the QoS latencies of the worst instance, in ms."""
    apps = [a["app"] for a in doc["tile"]["applications"]]
    metrics = Table(
        title=f"scaling study {doc['study_id']} ({doc['tile']['name']} tile): application metrics",
        title_justify="left",
    )
    latency = Table(title="QoS latency, worst instance (ms)", title_justify="left")
    for t in (metrics, latency):
        t.add_column("tiles", justify="right")
        for a in apps:
            t.add_column(a, justify="right")
    for col in ("IOPS", "MB/s", "score", "QoS"):
        metrics.add_column(col, justify="left" if col == "QoS" else "right")
    for s in doc["steps"]:
        by_app = {a["app"]: a for a in s["applications"]}
        mrow, lrow = [str(s["tiles"])], [str(s["tiles"])]
        for a in apps:
            r = by_app.get(a)
            if r is None:
                mrow.append("-")
                lrow.append("-")
                continue
            digits = 0 if r["metric_unit"] in ("mailboxes", "IOPS") else 1
            mark = "" if r["passed"] else " ✗"
            mrow.append(f"{r['metric_total']:,.{digits}f} {r['metric_unit']}{mark}")
            lrow.append(
                "\n".join(
                    f"{cid} {v:,.1f}" if v is not None else f"{cid} -"
                    for cid, v in r["worst_latency_ms"].items()
                )
                or "-"
            )
        total = s["total"]
        n_failed = len(s["failed"])
        mrow += [
            f"{total.get('iops', 0):,.0f}",
            f"{total.get('mbps', 0):,.1f}",
            "-" if s["score"] is None else f"{s['score']:.2f}",
            "pass" if s["passed"] else f"FAIL ({n_failed} criteria)",
        ]
        metrics.add_row(*mrow)
        latency.add_row(*lrow)
    return [metrics, latency]


def failure_lines(doc: dict, limit: int = 6) -> list[str]:
    """Why the first failing tile count failed, a few criteria at a time."""
    first = doc["first_failure"]
    if not first:
        return []
    shown = first["failed"][:limit]
    more = len(first["failed"]) - len(shown)
    lines = [f"{first['tiles']} tile(s) fail QoS:"] + [f"  {f}" for f in shown]
    if more > 0:
        lines.append(f"  ... and {more} more (see study.json)")
    return lines
