"""The replay section of a run report (`tilemark replay`, summary.replay): how faithfully the
replay kept to its traces, per stream: IOs issued against the records it had to issue, the
achieved rate against the trace's, how late IOs went out (docs/replay.md)."""

from __future__ import annotations

from typing import Any

from tilemark.report.base import Cell, Section, Table
from tilemark.report.format import num


def _us(late: dict[str, Any] | None, key: str) -> str:
    value = None if not late else late.get(key)
    return "-" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _rate_error(s: dict[str, Any]) -> Cell:
    pct = s.get("rate_error_pct")
    if pct is None:
        return Cell("-", "num")
    return Cell(f"{pct:+.2f}%", "num" if abs(pct) <= 1 else "warn")


def _skipped(s: dict[str, Any]) -> Cell:
    skipped = s.get("skipped")
    if skipped is None:
        reached = s.get("not_reached") or 0
        return Cell(f"{reached:,} not reached" if reached else "-", "num")
    return Cell(f"{skipped:,}", "fail" if skipped else "pass")


def replay_section(replay: dict[str, Any]) -> Section:
    """Replay accuracy: the verdict sentence, then one row per replayed stream."""
    rows = []
    for s in replay.get("streams") or []:
        late = s.get("lateness")
        rows.append(
            [
                Cell(s["name"]),
                Cell(f"{s['records']:,}", "num"),
                Cell(f"{s['issued']:,}", "num"),
                _skipped(s),
                Cell(num(s.get("trace_iops")), "num"),
                Cell(num(s.get("achieved_iops")), "num"),
                _rate_error(s),
                Cell(_us(late, "p50_us"), "num"),
                Cell(_us(late, "p99_us"), "num"),
                Cell(_us(late, "max_us"), "num"),
            ]
        )
    mode = replay.get("mode", "timed")
    caption = (
        "records: IOs in one pass of the stream's list; rate error: achieved against the rate the "
        "recorded times of the same IOs ask for"
        if mode == "timed"
        else "rate: achieved against the trace's own rate (the replay was not timed)"
    ) + "; lateness: issue time against the recorded time, in microseconds."
    table = Table(
        "replay-streams",
        "Replayed streams",
        [
            "stream",
            "records",
            "issued",
            "skipped",
            "trace IOPS",
            "achieved IOPS",
            "rate error",
            "late p50",
            "late p99",
            "late max",
        ],  # fmt: skip
        rows,
        caption=caption,
    )
    return Section("replay", "Replay accuracy", [table], intro=replay.get("verdict", ""))
