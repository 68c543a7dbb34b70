"""Running tiles: compile N tiles to a workload on one target, run it, judge the applications.

Shared by `tilemark run --tiles N` and every step of `tilemark scale`.
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
from tilemark.apps import TileLayout, TileSpec, compile_tiles
from tilemark.runner import RunOutcome, run_plan


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

    def doc(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "target": self.target,
            "size": self.capacity,
            "duration": self.duration,
            "warmup": self.warmup,
            "interval": self.interval,
            "backend": self.backend,
            "direct": self.direct,
            "seed": self.seed,
        }
        if self.threads:
            d["threads"] = self.threads
        return d


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
) -> RunOutcome:
    """Run N tiles on a prepared target; the summary gains an `applications` section."""
    workload, layout = tile_workload(
        tile, tiles, settings, max_tiles=max_tiles, dio_alignment=info.dio_alignment
    )
    compiled = plan.compile_plan(workload, info)
    windows = SnapshotCompactor(settings.qos_interval_s)

    def analyze(compiled: dict, result: dict, summary: dict) -> None:
        apps = application_results(
            tile,
            layout,
            compiled,
            windows.snapshots(),
            result,
            qos_interval_s=settings.qos_interval_s,
        )
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
        on_snapshots=windows.extend,
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
