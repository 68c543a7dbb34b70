"""The per-target part of a run's report (runs with several targets): a table of what each
target received over the measurement window, and IOPS, MB/s and p99 latency per target over
time from targets.parquet (docs/results-schema.md, Per target)."""

from __future__ import annotations

from typing import Any

from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Section, Table
from tilemark.report.data import RunData
from tilemark.report.format import ms, num
from tilemark.report.telemetry import read_rows
from tilemark.run.pertarget import TARGETS_FILE, TARGETS_LOG
from tilemark.store import results


def target_rows(run: RunData) -> list[dict[str, Any]]:
    """targets.parquet (or the log of a run that did not finish) as dicts; [] without one."""
    return read_rows(run.run_dir, TARGETS_FILE, TARGETS_LOG)


def series(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One point per interval and target: IOPS, MB/s of data IOs and their p99 (ms)."""
    points: dict[tuple[int, str], dict[str, Any]] = {}
    for r in rows:
        key = (r["interval"], r["target_name"])
        secs = max((r["end_ns"] - r["start_ns"]) / 1e9, 1e-9)
        p = points.setdefault(
            key,
            {
                "group": r["target_name"],
                "t_s": (r["start_ns"] + r["end_ns"]) / 2e9,
                "start_s": r["start_ns"] / 1e9,
                "end_s": r["end_ns"] / 1e9,
                "phase": r["phase"],
                "iops": 0.0,
                "mbps": 0.0,
            },
        )
        if r["op"] in ("read", "write"):
            p["iops"] += r["ops"] / secs
            p["mbps"] += r["bytes"] / 1e6 / secs
            p99 = r.get("latency_p99_us")
            if p99 is not None:
                p[f"{r['op']}_p99"] = p99 / 1e3
    return sorted(points.values(), key=lambda p: (p["t_s"], p["group"]))


def targets_table(summary: results.Summary) -> Table:
    rows = []
    for t in summary.targets or []:
        rl, wl = t.read_latency or results.Latency(), t.write_latency or results.Latency()
        cells = [
            str(t.name),
            str(t.path or ""),
            num(t.iops),
            num(t.mbps),
            num(t.read_iops),
            num(t.write_iops),
            ms(rl.p50_ms) or "-",
            ms(rl.p99_ms) or "-",
            ms(wl.p50_ms) or "-",
            ms(wl.p99_ms) or "-",
        ]
        errors = t.errors or 0
        rows.append(
            [Cell(c, "" if k < 2 else "num") for k, c in enumerate(cells)]
            + [Cell(num(errors), "fail" if errors else "num")]
        )
    return Table(
        "targets-table",
        "Per target (measurement window)",
        [
            "target",
            "path",
            "IOPS",
            "MB/s",
            "read IOPS",
            "write IOPS",
            "read p50 ms",
            "read p99 ms",
            "write p50 ms",
            "write p99 ms",
            "errors",
        ],  # fmt: skip
        rows,
    )


def targets_section(run: RunData, warmup_s: float, prefix: str = "") -> Section | None:
    """The section of a run with several targets; None for one target."""
    summary = run.typed.summary or results.Summary()
    if len(summary.targets or []) < 2:
        return None
    items: list[Figure | Table] = [targets_table(summary)]
    points = series(target_rows(run))
    if points:
        order = [t.name for t in summary.targets or []]
        for field, title in (("iops", "IOPS per target"), ("mbps", "MB/s per target")):
            items.append(
                Figure(
                    f"{prefix}targets-{field}",
                    title,
                    charts.throughput_over_time(
                        points,
                        field=field,
                        title=title,
                        warmup_s=warmup_s,
                        group_title="target",
                        order=order,
                    ),
                )  # fmt: skip
            )
        items.append(
            Figure(
                f"{prefix}targets-latency",
                "Latency per target",
                charts.latency_over_time(
                    points,
                    stats=["read_p99", "write_p99"],
                    warmup_s=warmup_s,
                    title="Read and write p99 per target (merged histograms)",
                    group_title="target",
                    order=order,
                ),
            )  # fmt: skip
        )
    return Section(
        f"{prefix}targets",
        "Targets",
        items,
        "What each target received: its one-target streams and its share of the streams "
        "spread over several targets.",
    )
