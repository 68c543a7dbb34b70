"""Running tiles: compile N tiles to a workload on the targets, run it, judge the applications.

Shared by `tilemark run --tiles N` and every step of `tilemark scale`.

A tile run measures for `duration`. When `max_duration` is longer, the engine is planned for
`max_duration` and a QosMonitor re-judges the applications once a second after `duration`:
as soon as no whole-window criterion's confidence interval straddles its limit, the run is
stopped ("decided"), and also as soon as a criterion has decidedly failed; otherwise it
measures on until `max_duration`, where an undecided criterion counts as failed, within noise.

With `--until-steady` a tile run (and every step of a scaling study) measures in rounds until
the SNIA PTS steady-state rule holds (steadyrun.py), and its applications are judged over the
steady window: the last five rounds, the same window its summary covers. A run that is not
steady after `--max-rounds` is judged over everything it measured and says so.

Longer than 600 lines because the settings, the two monitors and the driver of a tile run
share its settings and the judging of its applications; the file applications' part lives in
files/tilerun.py.
"""

from __future__ import annotations

import collections
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tilemark import targets
from tilemark.analysis.confidence import BatchSeries
from tilemark.analysis.qos import SnapshotCompactor
from tilemark.analysis.steady import WINDOW
from tilemark.analysis.tiles import DEFAULT_QOS_INTERVAL_S, application_results
from tilemark.console import say
from tilemark.errors import UsageError
from tilemark.options.typed import Options
from tilemark.run.outcome import RunOutcome
from tilemark.run.runner import run_plan
from tilemark.run.steady import (
    NOT_PER_REPETITION,
    RoundMonitor,
    SteadySettings,
    check_round,
    steady_settings,
)
from tilemark.run.where import RemoteTargets, Targets, compile_on, inspect_targets
from tilemark.targets.spec import TargetSpec, parse_targets, per_tile, tile_path
from tilemark.units import format_size, parse_duration
from tilemark.workload import plan
from tilemark.workload.apps import TileSpec
from tilemark.workload.tilefile import default_tile, load_tile_or_profile, parse_sets
from tilemark.workload.tilelayout import (
    TileLayout,
    compile_tiles,
    expand_targets,
    min_capacity,
)

DEFAULT_TILE_DURATION = "60s"
DEFAULT_TILE_WARMUP = "10s"
MAX_TILES = 256
CHECK_EVERY_S = 1.0  # how often an extended step re-judges its applications


@dataclass
class TileRunSettings:
    """Run-wide settings of a tile run (the same for every step of a study)."""

    targets: list[TargetSpec]
    capacity: int  # of every target
    duration: str | float
    warmup: str | float
    interval: str | float = 1.0
    backend: str = "uring"
    threads: int | None = None
    direct: bool = True
    seed: int = 1
    qos_interval_s: float = DEFAULT_QOS_INTERVAL_S
    poll_us: int = 0
    cpus: tuple[int, ...] = ()  # engine thread i runs on cpus[i % len]
    sqpoll: bool = False  # uring: a kernel thread polls each ring's submission queue
    max_duration: str | float | None = None  # None: measure exactly `duration`
    warmup_defaulted: bool = False  # the warm-up is the tile default, not asked for
    max_errors: int = 0  # -1: never stop on IO errors
    io_timeout: float = 30.0  # seconds; 0: never
    steady: SteadySettings | None = None  # --until-steady: rounds until steady, at most max_s
    verify: bool = False  # verifiable blocks, reads checked (docs/verification.md)

    @property
    def duration_s(self) -> float:
        return parse_duration(self.duration, "duration")

    @property
    def max_duration_s(self) -> float:
        """How long a run may measure while a criterion is undecided (>= duration)."""
        if self.max_duration is None:
            return self.duration_s
        return max(parse_duration(self.max_duration, "max_duration"), self.duration_s)

    def doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "target": [{"name": t.name, "path": t.path} for t in self.targets],
            "size": self.capacity,
            "duration": self.max_duration_s,
            "warmup": self.warmup,
            "interval": self.interval,
            "backend": self.backend,
            "direct": self.direct,
            "seed": self.seed,
            "poll_us": self.poll_us,
            "max_errors": self.max_errors,
            "io_timeout": self.io_timeout,
            "verify": self.verify,
        }
        if self.threads:
            d["threads"] = self.threads
        if self.cpus:
            d["cpus"] = list(self.cpus)
        if self.sqpoll:
            d["sqpoll"] = True
        return d

    @property
    def target_names(self) -> list[str] | None:
        """The targets' names for the layout; None with one shared target (it needs no
        name)."""
        if len(self.targets) > 1 or self.own_files:
            return [t.name for t in self.targets]
        return None

    @property
    def own_files(self) -> frozenset[str]:
        """The targets that give each tile a file of its own ({tile} in the path)."""
        return frozenset(t.name for t in self.targets if per_tile(t.path))

    @property
    def target(self) -> str:
        """The targets as study.json records them: paths joined by ', '."""
        return ", ".join(t.path for t in self.targets)

    def notes(self) -> list[str]:
        """What the line announcing a tile run should add about its timing."""
        out = []
        if self.steady is not None:
            out.append(self.steady.describe())
        if self.warmup_defaulted:
            warmup = parse_duration(self.warmup, "warmup")
            out.append(f"the {warmup:g}s warm-up is the tile-run default (--warmup 0 for none)")
        if self.max_duration_s > self.duration_s:
            out.append(
                f"measures {self.duration_s:g}s, longer (up to {self.max_duration_s:g}s) while "
                "a QoS criterion is undecided"
            )
        return out

    def record(self) -> dict[str, Any]:
        """How the runs were timed, for study.json."""
        return {
            "duration": self.duration_s,
            "max_duration": self.max_duration_s,
            "warmup": parse_duration(self.warmup, "warmup"),
            "qos_interval_s": self.qos_interval_s,
            "until_steady": None
            if self.steady is None
            else {
                "round_s": self.steady.round_s,
                "max_rounds": self.steady.max_rounds,
                "metric": self.steady.metric,
            },
        }


def tile_settings(
    opts: Options, *, extend_by_default: bool, until_steady: bool = True, block: bool = True
) -> TileRunSettings:
    """Tile-run settings from the typed options, checked; nothing is touched yet.
    `until_steady` False refuses --until-steady (repeat measures each repetition for
    --duration); `block` False (a tile of file applications only) takes no target."""
    run = opts.workload
    target = run.run.get("target")
    if not block:
        if target or opts.tile.capacity:
            raise UsageError(
                f"{'--target' if target else '--capacity'} is for block applications; this "
                "tile holds file applications only, whose sets go in each one's dir."
            )
        target_specs, capacity = [], 0
    elif not target:
        raise UsageError("--target is required: a file (created if missing) or a block device.")
    else:
        target_specs = parse_targets(list(target), None, flag=True)
        capacity = opts.tile.capacity or min(
            targets.default_size(tile_path(t.path, 1)) for t in target_specs
        )
    interval_s = run.parsed("interval", 1.0)
    steady = steady_settings(opts)
    if steady is not None and not until_steady:
        raise UsageError(NOT_PER_REPETITION)
    if steady is not None and not block:
        raise UsageError(
            "--until-steady applies the steady-state rule to block applications; this tile "
            "holds file applications only (measure them for --duration)."
        )
    duration_s = run.parsed("duration", parse_duration(DEFAULT_TILE_DURATION, "duration"))
    if steady is not None:
        if opts.tile.max_duration is not None:
            raise UsageError(
                "--max-duration does not apply with --until-steady: a tile run measures until it "
                "is steady, at most --max-rounds rounds of --round."
            )
        check_round(steady, interval_s)
        duration_s = steady.max_s
    warmup_s = run.parsed("warmup", parse_duration(DEFAULT_TILE_WARMUP, "warmup"))
    qos_s = opts.tile.qos_interval
    if steady is not None:
        qos_s = _steady_qos_interval(steady.round_s, qos_s)
    elif qos_s is None:
        # 60 s intervals (methodology 11.2), but at least four of them in a short run.
        qos_s = min(DEFAULT_QOS_INTERVAL_S, max(duration_s / 4, 1.0))
    default_max = 4 * duration_s if extend_by_default and steady is None else duration_s
    max_s = opts.tile.max_duration if opts.tile.max_duration is not None else default_max
    if max_s < duration_s:
        raise UsageError(
            f"--max-duration {max_s:g}s is shorter than --duration ({duration_s:g} s); it is the "
            "longest a step may measure."
        )
    return TileRunSettings(
        targets=target_specs,
        capacity=capacity,
        duration=duration_s,
        warmup=warmup_s,
        interval=interval_s,
        backend=run.parsed("backend", "uring"),
        threads=run.parsed("threads", None),
        direct=not run.buffered,
        seed=run.parsed("seed", 1),
        qos_interval_s=qos_s,
        poll_us=run.parsed("poll_us", 0),
        cpus=run.parsed("cpus", ()),
        sqpoll=run.parsed("sqpoll", False),
        max_duration=max_s,
        warmup_defaulted="warmup" not in run.run and warmup_s > 0,
        max_errors=run.parsed("max_errors", 0),
        io_timeout=run.parsed("io_timeout", 30.0),
        steady=steady,
        verify=run.verify,
    )


def _steady_qos_interval(round_s: float, given: float | None) -> float:
    """The QoS interval of an until-steady tile run: it must divide a round, so the steady
    window (whole rounds) is whole QoS intervals; by default the round, cut into equal parts of
    at most 60 s (methodology 11.2)."""
    if given is None:
        return round_s / math.ceil(round_s / DEFAULT_QOS_INTERVAL_S - 1e-9)
    parts = round_s / given
    if parts < 1 - 1e-9 or abs(parts - round(parts)) > 1e-6:
        raise UsageError(
            f"--qos-interval {given:g}s must divide --round {round_s:g}s into whole intervals, "
            "so the steady window is whole QoS intervals."
        )
    return given


def load_tile_spec(tile_file: str | None, sets: list[str] | None) -> TileSpec:
    """The tile of a file (or of one profile, tilefile.load_tile_or_profile), else the default
    tile, with --set overrides applied."""
    overrides = parse_sets(sets or [])
    return load_tile_or_profile(str(tile_file), overrides) if tile_file else default_tile(overrides)


def inspect_tile_targets(
    tile: TileSpec,
    settings: TileRunSettings,
    max_tiles: int,
    *,
    destroy_data: list[str] | None = None,
    force: bool = False,
    fill: bool = False,
) -> Targets:
    """Check the layout fits --capacity, then inspect every target (safety checks); no IO.
    Tiles write every target (a target without a stream at this tile count gets one at a
    larger count). A tile of file applications only has none. File applications run on this
    host: a --cluster run of a tile holding one is refused here, before anything is locked."""
    need = min_capacity(tile, max_tiles, settings.target_names)
    if settings.capacity < need:
        raise UsageError(
            f"--capacity {format_size(settings.capacity)} is too small for {max_tiles} tile(s) "
            f"of {tile.name}: every application needs at least 1 MiB; use at least "
            f"{format_size(need)}."
        )
    sized = expand_targets(tile, settings.targets, settings.capacity, max_tiles)
    infos = inspect_targets(
        sized,
        writes=[True] * len(sized),
        direct=settings.direct,
        destroy_data=destroy_data,
        force=force,
        size_flag="--capacity",
        fill=fill,
        io_timeout_s=settings.io_timeout,
    )
    if tile.file_apps and isinstance(infos, RemoteTargets):
        raise UsageError(
            "a tile's file applications run on this host; a --cluster run of a tile holding "
            "one is refused."
        )
    return infos


class QosMonitor:
    """Decides when an extended tile run has measured enough (see the module doc)."""

    def __init__(
        self,
        windows: SnapshotCompactor,
        judge: Any,  # () -> applications dict of application_results
        *,
        duration_s: float,
        max_duration_s: float,
        check_every_s: float = CHECK_EVERY_S,
    ):
        self.windows = windows
        self.judge = judge
        self.duration_s = duration_s
        self.max_duration_s = max_duration_s
        self.check_every_s = check_every_s
        self._checked_at = -1.0
        self.checks = 0
        self.undecided: list[str] = []

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        self.windows.extend(snapshots)

    def window_engine(self, filling: Any) -> float:
        """The engine merges this monitor's QoS windows (engine.Handle.set_window): its
        measurement intervals come as WindowFeeds, `filling` gives the window being filled.
        Returns the window's length (s)."""
        self.windows.filling = filling
        return self.windows.window_s

    def messages(self) -> list[str]:
        return []

    def should_stop(self) -> str | None:
        """ "decided" once every whole-window criterion is decided after `duration`."""
        if self.max_duration_s <= self.duration_s:
            return None  # planned for exactly `duration`: the engine ends the run itself
        measured = self.windows.measured_s()
        if measured < self.duration_s - 1e-6 or measured - self._checked_at < self.check_every_s:
            return None
        self._checked_at = measured
        self.checks += 1
        apps = self.judge()
        self.undecided = apps["undecided"]
        # A decided failure decides the step whatever the undecided criteria turn out to be.
        if apps["verdict"] == "fail" or not self.undecided:
            return "decided"
        return None

    def extended(self) -> bool:
        """True when the run measured past `duration` to decide a criterion."""
        return self.windows.measured_s() > self.duration_s + self.check_every_s


class SteadyTileMonitor:
    """The RunMonitor of a tile run with --until-steady: rounds until the SNIA PTS rule holds
    (steadyrun.RoundMonitor), and per round the QoS inputs (snapshots compacted to QoS
    intervals, latency sums for the confidence intervals of means) of the last WINDOW rounds,
    so the applications are judged over the steady window the summary covers. Memory holds
    WINDOW rounds of QoS-interval snapshots, whatever the run's length."""

    def __init__(self, compiled: dict[str, Any], steady: SteadySettings, qos_interval_s: float):
        self.rounds = RoundMonitor(compiled, steady)
        self.whole = SnapshotCompactor(qos_interval_s)
        self.qos_interval_s = qos_interval_s
        self._parts: collections.deque[SnapshotCompactor] = collections.deque(maxlen=WINDOW)
        self._part: SnapshotCompactor | None = None
        self._previous: dict[str, Any] | None = None

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        self.whole.extend(snapshots)
        for snap in snapshots:
            in_round = snap["phase"] == "measure" and not self.rounds.steady
            rounds_before = len(self.rounds.rounds)
            self.rounds.add([snap])
            if in_round:
                if self._part is None:
                    self._part = SnapshotCompactor(self.qos_interval_s)
                    if self._previous is not None:
                        # The backlog level as the round begins, for throughput criteria.
                        self._part.add({**self._previous, "phase": "warmup"})
                self._part.add(snap)
                if len(self.rounds.rounds) > rounds_before:
                    self._parts.append(self._part)
                    self._part = None
            self._previous = snap

    def messages(self) -> list[str]:
        return self.rounds.messages()

    def should_stop(self) -> str | None:
        return self.rounds.should_stop()

    def judged(
        self, result: dict[str, Any]
    ) -> tuple[list[dict[str, Any]], dict[str, Any], BatchSeries, bool]:
        """(snapshots, result, batches, over the steady window?) that the applications are
        judged on: the steady window when the rule held, else the whole measurement."""
        window = self.rounds.window_result() if self.rounds.steady else None
        if window is None or len(self._parts) < WINDOW:
            return self.whole.snapshots(), result, self.whole.batches, False
        parts = list(self._parts)
        snapshots = parts[0].snapshots() + [
            snap for part in parts[1:] for snap in part.snapshots() if snap["phase"] == "measure"
        ]
        return snapshots, window, BatchSeries.joined(p.batches for p in parts), True


def tile_workload(
    tile: TileSpec,
    tiles: int,
    settings: TileRunSettings,
    *,
    max_tiles: int,
    infos: Targets,
) -> tuple[plan.Workload, TileLayout]:
    """The workload of `tiles` tiles laid out for up to `max_tiles` on the targets; for a tile
    of file applications only, a workload that keeps time (its file run is the IO)."""
    if not tile.block:
        clock = plan.clock_workload(
            f"{tile.name}-x{tiles}",
            f"tiles:{tile.source}",
            duration_s=settings.max_duration_s,
            warmup_s=parse_duration(settings.warmup, "warmup"),
            interval_s=parse_duration(settings.interval, "interval"),
        )
        return clock, TileLayout(doc={}, tags=[])
    layout = compile_tiles(
        tile,
        tiles,
        capacity=settings.capacity,
        max_tiles=max_tiles,
        dio_alignment=max(i.dio_alignment for i in infos) if settings.direct else 0,
        targets=settings.target_names,
        own_files=settings.own_files,
    )
    doc = {**settings.doc(), **layout.doc}
    if settings.own_files:
        expanded = expand_targets(tile, settings.targets, settings.capacity, max_tiles)
        doc["target"] = [t.to_json() for t in expanded]
    return plan.parse_workload(doc, source=f"tiles:{tile.source}"), layout


def tiles_plan(
    tile: TileSpec, tiles: int, settings: TileRunSettings, infos: Targets, *, max_tiles: int
) -> tuple[plan.Workload, TileLayout, dict[str, Any]]:
    """The workload, layout and plan of `tiles` tiles on inspected targets (no IO yet); across
    a cluster's hosts, tiles go round robin."""
    workload, layout = tile_workload(tile, tiles, settings, max_tiles=max_tiles, infos=infos)
    return workload, layout, compile_on(workload, infos, groups=[t.tile for t in layout.tags])


def run_tiles(
    tile: TileSpec,
    tiles: int,
    settings: TileRunSettings,
    infos: Targets,
    *,
    max_tiles: int,
    results: Path,
    argv: list[str],
    console: Console,
    kind: str = "tiles",
    label: str | None = None,
) -> RunOutcome:
    """Run N tiles on the prepared targets; the summary gains an `applications` section."""
    workload, layout, compiled = tiles_plan(tile, tiles, settings, infos, max_tiles=max_tiles)
    steady = (
        SteadyTileMonitor(compiled, settings.steady, settings.qos_interval_s)
        if settings.steady is not None
        else None
    )
    windows = steady.whole if steady is not None else SnapshotCompactor(settings.qos_interval_s)
    companion = file_companion(tile, tiles, settings)

    def judge_so_far() -> dict[str, Any]:
        apps = application_results(
            tile,
            layout,
            compiled,
            windows.snapshots(),
            windows.result() or {},
            qos_interval_s=settings.qos_interval_s,
            batches=windows.batches,
        )
        if companion is not None:
            companion.judge_so_far(apps, tile.file_apps, windows.measured_s())
        return apps

    qos_monitor = QosMonitor(
        windows,
        judge_so_far,
        duration_s=settings.duration_s,
        max_duration_s=settings.max_duration_s,
    )

    def analyze(compiled: dict, result: dict, summary: dict) -> None:
        snapshots, judged, batches, over_window = (
            windows.snapshots(),
            result,
            windows.batches,
            False,
        )
        if steady is not None:
            steady.rounds.analyze(compiled, result, summary)
            snapshots, judged, batches, over_window = steady.judged(result)
        apps = application_results(
            tile,
            layout,
            compiled,
            snapshots,
            judged,
            qos_interval_s=settings.qos_interval_s,
            batches=batches,
        )
        apps["measurement"] = {
            "duration_s": settings.duration_s,
            "max_duration_s": settings.max_duration_s,
            "measured_s": (judged["measure_end_ns"] - judged["measure_start_ns"]) / 1e9,
            "extended": qos_monitor.extended(),
            "checks": qos_monitor.checks,
        }
        if steady is not None:
            state = summary["steady_state"]
            apps["measurement"]["steady"] = {
                "steady": state["steady"],
                "rule_met": state["rule_met"],
                "rounds": len(state["rounds"]),
                "judged_over": "steady window" if over_window else "whole run",
                "window": state["window"],
                "verdict": state["verdict"],
            }
        apps["layout"] = {
            "tile": tile.name,
            "max_tiles": max_tiles,
            "capacity": settings.capacity,
            "regions": layout.regions,
            "streams": [t.to_json() for t in layout.tags],
        }
        summary["applications"] = apps

    from tilemark.trace.tileapp import tile_lists

    if companion is not None:
        analyze = companion.judging(analyze, tile.file_apps)

    try:
        if companion is not None:
            companion.prepare()
            say(console, companion.describe())
        with tile_lists(compiled, trace_sources(tile, layout), results) as lists_start:
            before_start = lists_start if companion is None else companion.before(lists_start)
            outcome = run_plan(
                workload,
                infos,
                compiled,
                results=results,
                argv=argv,
                console=console,
                kind=kind,
                analyze=analyze,
                monitor=steady if steady is not None else qos_monitor,
                note="; ".join(settings.notes()) or None,
                label=label,
                apps={t.index: t.app for t in layout.tags},
                before_start=before_start,
                on_start=None if companion is None else companion.start,
                live_rows=None if companion is None else companion.live_rows,
            )
    finally:
        if companion is not None:
            companion.close()
    return outcome


def file_companion(tile: TileSpec, tiles: int, settings: TileRunSettings) -> Any:
    """The file run of the tile's file applications (files/tilerun.py), or None."""
    if not tile.file_apps:
        return None
    from tilemark.files.tilerun import FileCompanion

    return FileCompanion(
        tile.file_apps,
        tiles,
        warmup_s=parse_duration(settings.warmup, "warmup"),
        max_duration_s=settings.max_duration_s,
        interval_s=parse_duration(settings.interval, "interval"),
    )


def trace_sources(tile: TileSpec, layout: TileLayout) -> dict[int, Any]:
    """Plan stream index -> the trace it replays, for the streams of trace applications."""
    apps = {a.label: a for a in tile.apps}
    out = {}
    for tag in layout.tags:
        for stream in apps[tag.app].profile.streams:
            if stream.name == tag.stream and stream.trace is not None:
                out[tag.index] = stream.trace
    return out


def _fmt(v: float | None, digits: int = 1) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}"


def applications_table(apps: dict[str, Any], title: str) -> Table:
    """Per application instance: its metric, key latencies, throughput and QoS verdict."""
    table = Table(title=title, title_justify="left")
    for col, justify in [
        ("tile", "right"),
        ("application", "left"),
        ("metric", "right"),
        ("target", "right"),
        ("latency (QoS)", "left"),
        ("IOPS", "right"),
        ("MB/s", "right"),
        ("QoS", "left"),
    ]:
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i in apps["instances"]:
        lat = ", ".join(f"{cid} {_fmt(v, 2)}" for cid, v in i["latency_ms"].items())
        verdict = "pass" if i["passed"] else "FAIL: " + "; ".join(i["failed"])
        digits = 0 if i["metric_unit"] in ("mailboxes", "IOPS") else 1
        table.add_row(
            str(i["tile"]),
            i["app"],
            f"{_fmt(i['metric'], digits)} {i['metric_unit']}",
            _fmt(i["target_metric"], digits),
            lat or "-",
            _fmt(i["iops"], 0),
            _fmt(i["mbps"], 1),
            verdict,
        )
    return table
