"""Running tiles: compile N tiles to a workload on one target, run it, judge the applications.

Shared by `tilemark run --tiles N` and every step of `tilemark scale`.

A tile run measures for `duration`. When `max_duration` is longer, the engine is planned for
`max_duration` and a QosMonitor re-judges the applications once a second after `duration`:
as soon as no whole-window criterion's confidence interval straddles its limit, the run is
stopped ("decided"), and also as soon as a criterion has decidedly failed; otherwise it
measures on until `max_duration`, where an undecided criterion counts as failed, within noise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tilemark import plan, targets
from tilemark.analysis.qos import SnapshotCompactor
from tilemark.analysis.tiles import DEFAULT_QOS_INTERVAL_S, application_results
from tilemark.apps import (
    TileLayout,
    TileSpec,
    compile_tiles,
    default_tile,
    load_tile,
    min_capacity,
    parse_sets,
)
from tilemark.errors import UsageError
from tilemark.options import option
from tilemark.runner import RunOutcome, run_plan
from tilemark.units import format_size, parse_duration

DEFAULT_TILE_DURATION = "60s"
DEFAULT_TILE_WARMUP = "10s"
MAX_TILES = 256
CHECK_EVERY_S = 1.0  # how often an extended step re-judges its applications


@dataclass
class TileRunSettings:
    """Run-wide settings of a tile run (the same for every step of a study)."""

    target: str
    capacity: int
    duration: str | float
    warmup: str | float
    interval: str | float = 1.0
    backend: str = "uring"
    threads: int | None = None
    direct: bool = True
    seed: int = 1
    qos_interval_s: float = DEFAULT_QOS_INTERVAL_S
    poll_us: int = 0
    max_duration: str | float | None = None  # None: measure exactly `duration`
    warmup_defaulted: bool = False  # the warm-up is the tile default, not asked for
    max_errors: int = 0  # -1: never stop on IO errors
    io_timeout: float = 30.0  # seconds; 0: never

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
            "target": self.target,
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
        }
        if self.threads:
            d["threads"] = self.threads
        return d

    def notes(self) -> list[str]:
        """What the line announcing a tile run should add about its timing."""
        out = []
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
        }


def tile_settings(values: dict[str, Any], *, extend_by_default: bool) -> TileRunSettings:
    """Tile-run settings from the CLI's option values (parameter name -> raw value), checked
    with the option table's parsers; nothing is touched yet."""
    target = values.get("target")
    if not target:
        raise UsageError("--target is required: a file (created if missing) or a block device.")

    def parsed(scope: str, key: str, default: Any) -> Any:
        o = option(scope, key)
        raw = values.get(o.param)
        return default if raw is None else o.parse(raw, o.flag or key)

    capacity = parsed("tile", "capacity", None) or targets.default_size(target)
    duration_s = parsed("run", "duration", parse_duration(DEFAULT_TILE_DURATION, "duration"))
    warmup_s = parsed("run", "warmup", parse_duration(DEFAULT_TILE_WARMUP, "warmup"))
    qos_s = parsed("tile", "qos_interval", None)
    if qos_s is None:
        # 60 s intervals (methodology 11.2), but at least four of them in a short run.
        qos_s = min(DEFAULT_QOS_INTERVAL_S, max(duration_s / 4, 1.0))
    max_s = parsed("tile", "max_duration", 4 * duration_s if extend_by_default else duration_s)
    if max_s < duration_s:
        raise UsageError(
            f"--max-duration {values.get('max_duration')!r} is shorter than --duration "
            f"({duration_s:g} s); it is the longest a step may measure."
        )
    return TileRunSettings(
        target=target,
        capacity=capacity,
        duration=duration_s,
        warmup=warmup_s,
        interval=parsed("run", "interval", 1.0),
        backend=parsed("run", "backend", "uring"),
        threads=parsed("run", "threads", None),
        direct=not values.get("buffered"),
        seed=parsed("run", "seed", 1),
        qos_interval_s=qos_s,
        poll_us=parsed("run", "poll_us", 0),
        max_duration=max_s,
        warmup_defaulted=values.get("warmup") is None and warmup_s > 0,
        max_errors=parsed("run", "max_errors", 0),
        io_timeout=parsed("run", "io_timeout", 30.0),
    )


def load_tile_spec(tile_file: str | None, sets: list[str] | None) -> TileSpec:
    """The tile of a file, else the default tile, with --set overrides applied."""
    overrides = parse_sets(sets or [])
    return load_tile(str(tile_file), overrides) if tile_file else default_tile(overrides)


def inspect_tile_target(
    tile: TileSpec,
    settings: TileRunSettings,
    max_tiles: int,
    *,
    destroy_data: str | None = None,
    force: bool = False,
    fill: bool = False,
) -> targets.TargetInfo:
    """Check the layout fits --capacity, then inspect the target (safety checks); no IO."""
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
        size_flag="--capacity",
        fill=fill,
        io_timeout_s=settings.io_timeout,
    )


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


def tile_workload(
    tile: TileSpec, tiles: int, settings: TileRunSettings, *, max_tiles: int, dio_alignment: int
) -> tuple[plan.Workload, TileLayout]:
    """The workload of `tiles` tiles laid out for up to `max_tiles` on the target."""
    layout = compile_tiles(
        tile,
        tiles,
        capacity=settings.capacity,
        max_tiles=max_tiles,
        dio_alignment=dio_alignment if settings.direct else 0,
    )
    doc = {**settings.doc(), **layout.doc}
    return plan.parse_workload(doc, source=f"tiles:{tile.source}"), layout


def run_tiles(
    tile: TileSpec,
    tiles: int,
    settings: TileRunSettings,
    info: targets.TargetInfo,
    *,
    max_tiles: int,
    results: Path,
    argv: list[str],
    console: Console,
    kind: str = "tiles",
    label: str | None = None,
) -> RunOutcome:
    """Run N tiles on a prepared target; the summary gains an `applications` section."""
    workload, layout = tile_workload(
        tile, tiles, settings, max_tiles=max_tiles, dio_alignment=info.dio_alignment
    )
    compiled = plan.compile_plan(workload, info)
    windows = SnapshotCompactor(settings.qos_interval_s)
    monitor = QosMonitor(
        windows,
        lambda: application_results(
            tile,
            layout,
            compiled,
            windows.snapshots(),
            windows.result() or {},
            qos_interval_s=settings.qos_interval_s,
            batches=windows.batches,
        ),
        duration_s=settings.duration_s,
        max_duration_s=settings.max_duration_s,
    )

    def analyze(compiled: dict, result: dict, summary: dict) -> None:
        apps = application_results(
            tile,
            layout,
            compiled,
            windows.snapshots(),
            result,
            qos_interval_s=settings.qos_interval_s,
            batches=windows.batches,
        )
        apps["measurement"] = {
            "duration_s": settings.duration_s,
            "max_duration_s": settings.max_duration_s,
            "measured_s": (result["measure_end_ns"] - result["measure_start_ns"]) / 1e9,
            "extended": monitor.extended(),
            "checks": monitor.checks,
        }
        apps["layout"] = {
            "tile": tile.name,
            "max_tiles": max_tiles,
            "capacity": settings.capacity,
            "regions": layout.regions,
            "streams": [t.to_json() for t in layout.tags],
        }
        summary["applications"] = apps

    return run_plan(
        workload,
        info,
        compiled,
        results=results,
        argv=argv,
        console=console,
        kind=kind,
        analyze=analyze,
        monitor=monitor,
        note="; ".join(settings.notes()) or None,
        label=label,
        apps={t.index: t.app for t in layout.tags},
    )


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
