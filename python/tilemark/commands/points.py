"""`tilemark sweep`, `tilemark matrix` and `tilemark curve`: studies of one workload's
parameters on one set of targets.

Each parses its lists (study/points.py, study/curve.py), checks every point's workload before
any IO, locks and prepares the targets, runs the study on the framework (study/base.py) and
stores study.json and its CSV files in `<results>/studies/<id>/`; the points run so far are
kept however the study ends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console

from tilemark import cluster
from tilemark.commands import held
from tilemark.errors import UsageError
from tilemark.options import CURVE, MATRIX, SWEEP
from tilemark.options.typed import Options
from tilemark.report.csv import point_csvs
from tilemark.run.where import Targets, compile_on, inspect_targets
from tilemark.store.outputs import OutputDir
from tilemark.store.results import read_study
from tilemark.study.base import (
    StepBook,
    StepSpec,
    Study,
    StudyEvents,
    StudyOutcome,
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
from tilemark.telemetry import prometheus
from tilemark.units import format_size
from tilemark.workload import plan

# A step's stream tables, on the inspected targets (None: before inspection, to probe).
Build = Callable[[StepSpec, Targets | None], list[dict[str, Any]]]
# What a point costs besides its measured time: starting the engine, storing the run (seconds).
POINT_OVERHEAD_S = 1.0
# The progress shown while a study runs, given how many points it has (None: unknown).
Progress = Callable[[int | None], StudyEvents | None]


def _named(message: str, flags: dict[str, str]) -> str:
    """A message about a stream the study built ("stream 'small': bs ...") naming the flag the
    user gave instead ("--small-bs ...")."""
    for where, flag in flags.items():
        message = message.replace(where, flag)
    return message


def _given_or(text: str | None, default: str) -> str:
    """A list flag's text as given (an empty one is an error, not the default)."""
    return default if text is None else text


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


def run_points(
    opts: Options,
    make_study: Callable[[], Study],
    build: Build,
    groups_of: Callable[[list[dict[str, Any]]], dict[str, list[int]]],
    *,
    argv: list[str],
    console: Console,
    events: StudyEvents | None,
    writes: bool,
    judge: Any = None,
    stream_flags: dict[str, str] | None = None,
    checks: list[StepSpec] | None = None,
    points: int | None = None,
) -> StudyOutcome:
    """Inspect the targets, compile every point, lock and prepare, run the study and store its
    CSV files beside study.json. With `points`, say before any IO how many and how long."""
    mode = opts.mode
    run_doc = opts.workload.run_doc()
    flag_keys = set(run_doc)
    label = opts.output.label
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
        **opts.safety.inspect_kwargs(),
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

    if points is not None:
        console.print(_estimate(mode, points, probe, opts.study.repeat or 1), markup=False)
    results = opts.output.results
    # --metrics-port: every point's run and the progress
    prometheus.from_options(opts.output, console)
    try:
        results.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"--results {results} cannot be created: {e.strerror}.") from None
    with held(infos, argv, console):
        runner = WorkloadStepRunner(
            workload_of,
            groups,
            infos,
            results=results,
            argv=argv,
            console=console,
            kind=f"{mode}-step",
            judge=judge,
            label=label,
        )
        record = StudyRecord(results, {"kind": probe_study.kind, "argv": argv, "label": label})
        repeat = opts.study.repeat or 1
        confirm_runs = 0  # sweeps and matrices judge nothing; a curve confirms its SLO search
        if mode == CURVE:
            confirm_runs = opts.study.confirm_runs if opts.study.confirm_runs is not None else 1
        outcome = run_study(
            make_study,
            runner,
            record,
            confirm_runs=confirm_runs,
            repeat=repeat,
            events=events,
            extra=lambda: {
                "target": infos[0].record(),
                "targets": [i.record() for i in infos],
                "workload": _workload_settings(probe),
                "repeat": repeat,
                "confirm_runs": confirm_runs,
            },
        )
    with OutputDir(outcome.path, force=True, what="study file") as csvs:  # its own directory
        point_csvs(read_study(outcome.doc), csvs)
    return outcome


def _estimate(mode: str, points: int, probe: plan.Workload, repeat: int) -> str:
    """'sweep: 32 points, about 6 min (...)': what the user is about to spend, before any IO."""
    each = probe.warmup_s + probe.duration_s
    total = points * repeat * (each + POINT_OVERHEAD_S)
    shown = f"{total / 60:.0f} min" if total >= 90 else f"{total:.0f} s"
    runs = f"{points} points" + (f" x {repeat} repetitions" if repeat > 1 else "")
    warm = f"{probe.warmup_s:g} s warm-up + " if probe.warmup_s else ""
    return (
        f"{mode}: {runs}, about {shown} ({warm}{probe.duration_s:g} s measured per point, plus "
        "target preparation)"
    )


def _run_points_on_cluster(opts: Options, *args: Any, **kwargs: Any) -> StudyOutcome:
    with cluster.opened(opts.cluster, force=opts.safety.force):
        return run_points(opts, *args, **kwargs)


# -----------------------------------------------------------------------------------------------
# sweep


def sweep_axes(opts: Options) -> SweepAxes:
    """The four lists of a sweep, parsed (`...` continues a ratio or a step)."""
    study = opts.study
    return SweepAxes(
        bs=parse_list(
            _given_or(study.sweep_bs, "4k"), "--bs", size_item, "IO sizes", "8k,16k,32k,...,1m",
            ellipsis=True,
        ),
        qd=parse_list(
            _given_or(study.sweep_qd, "1"), "--qd", qd_item, "queue depths from 1 to 4096",
            "1,2,4,...,256", ellipsis=True,
        ),
        read=parse_list(
            _given_or(study.sweep_read, "100"), "--read", percent_item,
            "read percentages from 0 to 100", "0,30,70,100", ellipsis=True,
        ),
        region=parse_list(
            _given_or(study.sweep_region, "100%"), "--region", region_item,
            "sizes or percentages of the data area", "1g,10g,100%",
        ),
    )  # fmt: skip


def sweep(opts: Options, *, argv: list[str], console: Console, progress: Progress) -> StudyOutcome:
    """The Cartesian product of the sweep's lists, one run per point."""
    axes = sweep_axes(opts)
    points = axes.points()
    if len(points) > MAX_POINTS and not opts.study.yes:
        raise UsageError(
            f"this sweep has {len(points)} points ({len(axes.bs)} sizes x {len(axes.qd)} queue "
            f"depths x {len(axes.read)} read mixes x {len(axes.region)} regions), more than "
            f"{MAX_POINTS}; shorten the lists or add --yes."
        )
    extra = dict(opts.workload.stream)
    pattern = extra.pop("pattern", None)
    if pattern is not None:
        from tilemark.options import option

        pattern = option("stream", "pattern").parse(pattern, "--pattern")

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

    flags = {f"stream 'stream': {k}": f"--{k}" for k in ("bs", "qd", "read", "pattern", "compress",
             "rw")} | {"stream 'stream': length": "--region"}  # fmt: skip
    return _run_points_on_cluster(
        opts,
        make_study,
        build,
        lambda streams: {"stream": [0]},
        argv=argv,
        console=console,
        events=progress(len(points)),
        points=len(points),
        writes=any(r < 100 for r in axes.read),
        stream_flags=flags,
    )


# -----------------------------------------------------------------------------------------------
# matrix


def matrix(opts: Options, *, argv: list[str], console: Console, progress: Progress) -> StudyOutcome:
    """Orion's matrix: small random IOs at outstanding-IO levels x large sequential streams."""
    study = opts.study
    small = parse_list(
        _given_or(study.small_qd, "0,1,2,4,...,32"), "--small-qd", count_item(4096),
        "outstanding IO counts from 0 to 4096", "1,2,4,...,32", ellipsis=True,
    )  # fmt: skip
    large = parse_list(
        _given_or(study.large_streams, "0,1,2,4"), "--large-streams", count_item(MAX_STREAMS),
        f"stream counts from 0 to {MAX_STREAMS}", "0,1,2,4", ellipsis=True,
    )  # fmt: skip
    if small == [0] and large == [0]:
        raise UsageError("--small-qd 0 and --large-streams 0 leave no IO to run; add a level.")
    settings = {
        "small_bs": study.small_bs or 8192,
        "small_read": study.small_read if study.small_read is not None else 100.0,
        "large_bs": study.large_bs or 1 << 20,
        "large_read": study.large_read if study.large_read is not None else 100.0,
        "large_qd": study.large_qd or 1,
    }
    extra = dict(opts.workload.stream)

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
    writes = (settings["small_read"] < 100 and any(small)) or (
        settings["large_read"] < 100 and any(large)
    )
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
    return _run_points_on_cluster(
        opts,
        make_study,
        build,
        matrix_groups,
        argv=argv,
        console=console,
        events=progress(cells),
        points=cells,
        writes=writes,
        stream_flags=named,
    )


# -----------------------------------------------------------------------------------------------
# curve


def _load_item(text: str, label: str) -> float:
    try:
        v = float(text.strip().removesuffix("%"))
    except ValueError:
        raise UsageError(f"{label} {text!r} is not a percentage.") from None
    if not 0 < v <= 1000:
        raise UsageError(f"{label} {text!r} is not a percentage from above 0 to 1000.")
    return v


def curve(opts: Options, *, argv: list[str], console: Console, progress: Progress) -> StudyOutcome:
    """The maximum IOPS closed loop, then offered loads in percent of it, and (with --slo)
    the highest rate that meets the objective."""
    from tilemark.options import option

    stream_flags = dict(opts.workload.stream)
    arrival = stream_flags.pop("arrival", "poisson")
    if option("stream", "arrival").parse(arrival, "--arrival") == "closed":
        raise UsageError(
            "--arrival for curve must be constant or poisson: the loads are offered rates "
            "(the maximum is found closed loop)."
        )
    loads = parse_list(
        _given_or(opts.study.loads, "10,20,...,100,110"), "--loads", _load_item,
        "percentages of the maximum IOPS above 0 (up to 1000)", "10,20,...,100,110",
        ellipsis=True,
    )  # fmt: skip
    loads = sorted(loads)
    max_qd = opts.study.max_qd or 256
    slo = parse_slo(opts.study.slo)
    base = {"name": "curve", **stream_flags}
    # The stream must parse on its own (rw, read, bs, pattern agree) before anything else.
    writes = plan.parse_stream(base, "curve", frozenset(base)).writes()

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

    def judge(spec: StepSpec, outcome: Any, compactor: Any) -> tuple[Any, dict[str, Any]]:
        if spec.params["phase"] == "max" or not slo:
            return None, {}
        verdict, extra = judge_slo(slo, outcome, compactor)
        return (verdict if spec.params["phase"] == "slo" else None), extra

    return _run_points_on_cluster(
        opts,
        make_study,
        build,
        lambda s: {"stream": [0]},
        argv=argv,
        console=console,
        events=progress(None),
        writes=writes,
        judge=judge,
        stream_flags={f"stream 'curve': {k}": f"--{k}" for k in stream_flags},
        checks=[
            StepSpec(1, "closed loop", {"phase": "max", "qd": max_qd}),
            StepSpec(2, "open loop", {"phase": "load", "qd": max_qd, "pct": 10, "rate": 1000.0}),
        ],
    )


COMMANDS = {SWEEP: sweep, MATRIX: matrix, CURVE: curve}
