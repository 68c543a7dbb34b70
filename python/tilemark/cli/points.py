"""`tilemark sweep`, `tilemark matrix` and `tilemark curve`: studies of one workload's
parameters on one target.

Each parses its lists (study/points.py, study/curve.py), checks every point's workload before
any IO, runs the study on the framework (study/base.py) and prints its tables; study.json, CSV
files and the report are written in `<results>/studies/<id>/`. Exit status: 0 done, 2 bad
input (nothing written), 3 when `curve --slo` finds no rate that meets the objective, 1 when a
run failed, 128 + signal when interrupted (the points so far are kept).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from tilemark.cli.common import EXIT_QOS, argv_of, consoles, results_path
from tilemark.cli.params import check_mode, scoped, table_command
from tilemark.cli.scale import write_study_report
from tilemark.errors import UsageError
from tilemark.options import CURVE, MATRIX, SWEEP, Option, label_of, option, safety
from tilemark.report.csv import point_csvs
from tilemark.run.runner import prepare
from tilemark.run.where import Targets, compile_on, inspect_targets, lock
from tilemark.store.outputs import OutputDir
from tilemark.study.base import (
    Attempt,
    StepBook,
    StepRecord,
    StepSpec,
    Study,
    StudyRecord,
    run_study,
)
from tilemark.study.curve import CurveStudy, judge_slo, parse_slo
from tilemark.study.points import (
    MAX_POINTS,
    MAX_STREAMS,
    MatrixStudy,
    SweepAxes,
    SweepStudy,
    WorkloadStepRunner,
    count_item,
    matrix_groups,
    matrix_streams,
    parse_list,
    percent_item,
    qd_item,
    region_bytes,
    region_item,
    size_item,
    sweep_stream,
    workload_from,
)
from tilemark.telemetry import prometheus as metrics
from tilemark.units import MAX_IOPS, format_size
from tilemark.workload import plan

# A step's stream tables, on the inspected targets (None: before inspection, to probe).
Build = Callable[[StepSpec, Targets | None], list[dict[str, Any]]]


def _study_value(values: dict[str, Any], key: str, default: Any) -> Any:
    o = option("study", key)
    raw = values.get(o.param)
    return default if raw is None else o.parse(raw, o.flag or key)


def _raw(values: dict[str, Any], param: str, default: str) -> Any:
    """A list flag's text as given (an empty one is an error, not the default)."""
    raw = values.get(param)
    return default if raw is None else raw


def _run_doc(values: dict[str, Any], mode: str) -> tuple[dict[str, Any], set[str]]:
    """Run-wide keys the user gave (target, size, duration, ...), as a workload file has them."""
    given = scoped(values, "run", mode)
    doc = {k: v for k, v in given.items() if option("run", k).toml}
    if values.get("buffered"):
        doc["direct"] = False
    return doc, set(doc)


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
        for reason in (attempt.detail.get("tool_bound") or {}).get("reasons") or []:
            self.console.print(f"  note: tool-bound: {reason}", markup=False)


def _run_points(
    ctx: typer.Context,
    values: dict[str, Any],
    mode: str,
    make_study: Callable[[], Study],
    build: Build,
    groups_of: Callable[[list[dict[str, Any]]], dict[str, list[int]]],
    *,
    writes: bool,
    judge: Any = None,
    total: int | None = None,
    stream_flags: dict[str, str] | None = None,
    checks: list[StepSpec] | None = None,
) -> tuple[dict[str, Any], Path, int | None, Console]:
    """Inspect the target, compile every point, run the study; (study.json, its directory,
    the exit status of an interruption, the output console)."""
    run_doc, flag_keys = _run_doc(values, mode)
    label = label_of(values)
    probe_study = make_study()
    first = probe_study.next_step(StepBook())
    assert first is not None

    def workload(streams: list[dict[str, Any]]) -> plan.Workload:
        try:
            return workload_from(run_doc, streams, flag_keys)
        except UsageError as e:
            raise UsageError(_named(str(e), stream_flags or {})) from None

    probe = workload(build(first[0], None))
    infos = inspect_targets(
        probe.targets,
        writes=[writes] * len(probe.targets),
        direct=probe.direct,
        io_timeout_s=probe.io_timeout_s,
        **safety(values),
    )

    def workload_of(spec: StepSpec) -> plan.Workload:
        return workload(build(spec, infos))

    def groups(spec: StepSpec) -> dict[str, list[int]]:
        return groups_of(build(spec, infos))

    # Every point must compile before any IO (sweeps and matrices know all their points).
    # A curve's steps depend on what it measures; `checks` stand for them.
    for spec in getattr(probe_study, "specs", checks or [first[0]]):
        try:
            compile_on(workload_of(spec), infos)
        except UsageError as e:
            raise UsageError(_named(str(e), stream_flags or {})) from None

    json_out = bool(values.get("json_out"))
    out, err = consoles(json_out)
    argv = argv_of(ctx)
    results = results_path(values)
    metrics.from_values(values)  # --metrics-port: every point's run and the study's progress
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--results {results} cannot be created: {e.strerror}.") from None
    with lock(infos, argv):
        if not prepare(infos, err):
            raise typer.Exit(130)
        runner = WorkloadStepRunner(
            workload_of,
            groups,
            infos,
            results=results,
            argv=argv,
            console=err,
            kind=f"{mode}-step",
            judge=judge,
            label=label,
        )
        record = StudyRecord(results, {"kind": probe_study.kind, "argv": argv, "label": label})
        repeat = _study_value(values, "repeat", 1)
        confirm_runs = _study_value(values, "confirm_runs", 1) if mode == CURVE else 0
        outcome = run_study(
            make_study,
            runner,
            record,
            confirm_runs=confirm_runs,
            repeat=repeat,
            events=_Progress(err, mode, total),
            extra=lambda: {
                "target": infos[0].record(),
                "targets": [i.record() for i in infos],
                "workload": _workload_settings(probe),
                "repeat": repeat,
                "confirm_runs": confirm_runs,
            },
        )
    if outcome.interrupted is not None:
        why = "a run failed" if outcome.interrupted == 1 else "interrupted"
        err.print(f"{why}: the study so far is kept, marked incomplete", markup=False)
    return outcome.doc, outcome.path, outcome.interrupted, out


def _named(message: str, flags: dict[str, str]) -> str:
    """A message about a stream the study built ("stream 'small': bs ...") naming the flag the
    user gave instead ("--small-bs ...")."""
    for where, flag in flags.items():
        message = message.replace(where, flag)
    return message


def _workload_settings(w: plan.Workload) -> dict[str, Any]:
    """What every point shares (study.json `workload`; compare checks it)."""
    return {
        "duration": w.duration_s,
        "warmup": w.warmup_s,
        "interval": w.interval_s,
        "backend": w.backend,
        "direct": w.direct,
        "seed": w.seed,
    }


def _finish(
    doc: dict[str, Any],
    path: Path,
    interrupted: int | None,
    values: dict[str, Any],
    out: Console,
    tables: list[Table],
    lines: list[str],
    json_body: dict[str, Any],
) -> None:
    err = Console(stderr=True, highlight=False)
    with OutputDir(path, force=True, what="study file") as csvs:  # the study's own directory
        point_csvs(doc, csvs)
    if values.get("json_out"):
        body = {"study_id": doc["study_id"], "study_dir": str(path.resolve()), **json_body}
        sys.stdout.write(json.dumps(body, indent=2) + "\n")
    for t in tables:
        out.print(t)
    for line in lines + _tool_bound_lines(doc):
        out.print(line, markup=False)
    out.print(f"study: {path}", markup=False)
    if values.get("write_report", True) and doc.get("steps"):
        write_study_report(path, results_path(values), err, out)
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


def sweep_axes(values: dict[str, Any]) -> SweepAxes:
    return SweepAxes(
        bs=parse_list(
            _raw(values, "sweep_bs", "4k"), "--bs", size_item, "IO sizes", "8k,16k,32k,...,1m",
            ellipsis=True,
        ),
        qd=parse_list(
            _raw(values, "sweep_qd", "1"), "--qd", qd_item, "queue depths from 1 to 4096",
            "1,2,4,...,256", ellipsis=True,
        ),
        read=parse_list(
            _raw(values, "sweep_read", "100"), "--read", percent_item,
            "read percentages from 0 to 100", "0,30,70,100", ellipsis=True,
        ),
        region=parse_list(
            _raw(values, "sweep_region", "100%"), "--region", region_item,
            "sizes or percentages of the data area", "1g,10g,100%",
        ),
    )  # fmt: skip


def _sweep(ctx: typer.Context, values: dict[str, Any]) -> None:
    check_mode(values, SWEEP, {SWEEP}, _clash("sweep"))
    axes = sweep_axes(values)
    points = axes.points()
    if len(points) > MAX_POINTS and not values.get("yes"):
        raise UsageError(
            f"this sweep has {len(points)} points ({len(axes.bs)} sizes x {len(axes.qd)} queue "
            f"depths x {len(axes.read)} read mixes x {len(axes.region)} regions), more than "
            f"{MAX_POINTS}; shorten the lists or add --yes."
        )
    stream_flags = scoped(values, "stream", SWEEP)
    pattern = stream_flags.pop("pattern", None)
    if pattern is not None:
        pattern = option("stream", "pattern").parse(pattern, "--pattern")
    extra = dict(stream_flags)

    def build(spec: StepSpec, infos: Targets | None) -> list[dict[str, Any]]:
        p = spec.params["point"]
        region = tuple(p["region_spec"])
        length = None
        if infos is not None:
            # Over several targets a region is the same on each: of the smallest data area.
            data_length = min(i.data_length for i in infos)
            length = region_bytes(region, data_length)  # type: ignore[arg-type]
            if length > data_length:
                raise UsageError(
                    f"--region {p['region']} is larger than the target's data area of "
                    f"{format_size(data_length)}; use a smaller region or a percentage."
                )
        table = sweep_stream(p, pattern, length or 0, extra)
        if length is None:
            del table["length"]
        return [table]

    def make_study() -> SweepStudy:
        return SweepStudy(axes, {"pattern": pattern or "uniform", **extra})

    doc, path, interrupted, out = _run_points(
        ctx,
        values,
        SWEEP,
        make_study,
        build,
        lambda streams: {"stream": [0]},
        writes=any(r < 100 for r in axes.read),
        total=len(points),
        stream_flags={f"stream 'stream': {k}": f"--{k}" for k in ("bs", "qd", "read", "pattern",
                      "compress", "rw")} | {"stream 'stream': length": "--region"},
    )  # fmt: skip
    fields = (
        "bs", "qd", "read", "region", "iops", "mbps", "p50_ms", "p99_ms", "device_iops",
        "device_util",
    )  # fmt: skip
    _finish(
        doc,
        path,
        interrupted,
        values,
        out,
        [sweep_table(doc)],
        [],
        {"points": [{k: p.get(k) for k in fields} for p in doc.get("points") or []]},
    )


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


def _matrix(ctx: typer.Context, values: dict[str, Any]) -> None:
    check_mode(values, MATRIX, {MATRIX}, _clash("matrix"))
    small = parse_list(
        _raw(values, "small_qd", "0,1,2,4,...,32"), "--small-qd", count_item(4096),
        "outstanding IO counts from 0 to 4096", "1,2,4,...,32", ellipsis=True,
    )  # fmt: skip
    large = parse_list(
        _raw(values, "large_streams", "0,1,2,4"), "--large-streams", count_item(MAX_STREAMS),
        f"stream counts from 0 to {MAX_STREAMS}", "0,1,2,4", ellipsis=True,
    )  # fmt: skip
    if small == [0] and large == [0]:
        raise UsageError("--small-qd 0 and --large-streams 0 leave no IO to run; add a level.")
    small_bs = _study_value(values, "small_bs", 8192)
    large_bs = _study_value(values, "large_bs", 1 << 20)
    small_read = _study_value(values, "small_read", 100.0)
    large_read = _study_value(values, "large_read", 100.0)
    large_qd = _study_value(values, "large_qd", 1)
    extra = scoped(values, "stream", MATRIX)
    settings = {
        "small_bs": small_bs, "small_read": small_read, "large_bs": large_bs,
        "large_read": large_read, "large_qd": large_qd,
    }  # fmt: skip

    def build(spec: StepSpec, infos: Targets | None) -> list[dict[str, Any]]:
        p = spec.params["point"]
        areas = (
            [(None, 1 << 62)]
            if infos is None
            else [(i.name if len(infos) > 1 else None, i.data_length) for i in infos]
        )
        return matrix_streams(p["small"], p["large"], areas=areas, extra=extra, **settings)

    def make_study() -> MatrixStudy:
        return MatrixStudy(small, large, {**settings, **extra})

    cells = len(make_study().specs)
    writes = (small_read < 100 and any(small)) or (large_read < 100 and any(large))
    named = {
        "stream 'small': bs": "--small-bs",
        "stream 'small': read": "--small-read",
        "stream 'small': compress": "--compress",
    }
    named |= {
        f"stream 'large{i}': {k}": f"--large-{k}"
        for i in range(max(large) or 1)
        for k in ("bs", "read", "qd")
    }
    named["stream 'large"] = "large stream '"
    doc, path, interrupted, out = _run_points(
        ctx, values, MATRIX, make_study, build, matrix_groups, writes=writes, total=cells,
        stream_flags=named,
    )  # fmt: skip
    keys = ("small_levels", "large_levels", "small_iops", "large_mbps", "small_latency_ms")
    _finish(
        doc,
        path,
        interrupted,
        values,
        out,
        matrix_tables(doc),
        [],
        {k: doc.get(k) for k in keys},
    )


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


def _curve(ctx: typer.Context, values: dict[str, Any]) -> None:
    check_mode(values, CURVE, {CURVE}, _clash("curve"))
    stream_flags = scoped(values, "stream", CURVE)
    arrival = stream_flags.pop("arrival", "poisson")
    if option("stream", "arrival").parse(arrival, "--arrival") == "closed":
        raise UsageError(
            "--arrival for curve must be constant or poisson: the loads are offered rates "
            "(the maximum is found closed loop)."
        )
    loads = parse_list(
        _raw(values, "loads", "10,20,...,100,110"), "--loads", _load_item,
        "percentages of the maximum IOPS above 0 (up to 1000)", "10,20,...,100,110",
        ellipsis=True,
    )  # fmt: skip
    loads = sorted(loads)
    max_qd = _study_value(values, "max_qd", 256)
    slo = parse_slo(values.get("slo"))
    base = {"name": "curve", **stream_flags}
    # The stream must parse on its own (rw, read, bs, pattern agree) before anything else.
    plan._parse_stream(base, "curve", frozenset(base))
    writes = plan._parse_stream(base, "curve", frozenset(base)).writes()

    def build(spec: StepSpec, infos: Targets | None) -> list[dict[str, Any]]:
        p = spec.params
        table = dict(base)
        if p["phase"] == "max":
            table["qd"] = p["qd"]
        else:
            table.update(rate=p["rate"], arrival=arrival, qd=p["qd"])
        return [table]

    def make_study() -> CurveStudy:
        return CurveStudy(
            loads_pct=loads,
            max_qd=max_qd,
            slo=slo,
            definition={"stream": {k: v for k, v in base.items() if k != "name"},
                        "arrival": arrival},
        )  # fmt: skip

    def judge(spec: StepSpec, outcome, compactor):
        if spec.params["phase"] == "max" or not slo:
            return None, {}
        verdict, extra = judge_slo(slo, outcome, compactor)
        return (verdict if spec.params["phase"] == "slo" else None), extra

    doc, path, interrupted, out = _run_points(
        ctx, values, CURVE, make_study, build, lambda s: {"stream": [0]}, writes=writes,
        judge=judge,
        stream_flags={f"stream 'curve': {k}": f"--{k}" for k in stream_flags},
        checks=[
            StepSpec(1, "closed loop", {"phase": "max", "qd": max_qd}),
            StepSpec(2, "open loop", {"phase": "load", "qd": max_qd, "pct": 10, "rate": 1000.0}),
        ],
    )  # fmt: skip
    points = [
        {
            "phase": p["phase"],
            "qd": p["qd"],
            "offered_pct": p["offered_pct"],
            "offered_iops": p["offered_iops"],
            "iops": p["iops"],
            "p50_ms": p["p50_ms"],
            "p99_ms": p["p99_ms"],
            "p999_ms": p["p999_ms"],
            "verdict": p["verdict"],
        }
        for p in doc.get("points") or []
    ]
    body = {
        "max_iops": doc.get("max_iops"),
        "qd_at_max": doc.get("qd_at_max"),
        "slo": doc.get("slo"),
        "slo_iops": doc.get("slo_iops"),
        "knee": doc.get("knee"),
        "points": points,
    }
    _finish(doc, path, interrupted, values, out, [curve_table(doc)], curve_lines(doc), body)
    if slo and doc.get("slo_iops") is None and interrupted is None:
        raise typer.Exit(EXIT_QOS)


def _load_item(text: str, label: str) -> float:
    try:
        v = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"{label} {text!r} is not a percentage.") from None
    if not 0 < v <= 1000:
        raise UsageError(f"{label} {text!r} is not a percentage from above 0 to 1000.")
    return v


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


sweep = table_command(
    "sweep",
    "Sweep one stream's IO size, queue depth, read % and region (Cartesian product).",
    {SWEEP},
    _sweep,
)
matrix = table_command(
    "matrix",
    "Orion's matrix: small random IOs at outstanding-IO levels x large sequential streams.",
    {MATRIX},
    _matrix,
)
curve = table_command(
    "curve",
    "The load/latency curve: the maximum IOPS, then offered loads up to 110% of it.",
    {CURVE},
    _curve,
)
