"""The replay section of a run report (`tilemark replay`, summary.replay): how faithfully the
replay kept to its traces, per stream: IOs issued against the records it had to issue, the
achieved rate against the trace's, how late IOs went out (docs/replay.md)."""

from __future__ import annotations

from tilemark.report.base import Cell, Section, Table
from tilemark.report.format import num
from tilemark.store import results


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 10 else f"{value:.1f}"


def _rate_error(s: results.ReplayStream) -> Cell:
    pct = s.rate_error_pct
    if pct is None:
        return Cell("-", "num")
    return Cell(f"{pct:+.2f}%", "num" if abs(pct) <= 1 else "warn")


def _skipped(s: results.ReplayStream) -> Cell:
    skipped = s.skipped
    if skipped is None:
        reached = s.not_reached or 0
        return Cell(f"{reached:,} not reached" if reached else "-", "num")
    return Cell(f"{skipped:,}", "fail" if skipped else "pass")


def replay_section(replay: results.Replay) -> Section:
    """Replay accuracy: the verdict sentence, then one row per replayed stream."""
    rows = []
    for s in replay.streams or []:
        late = s.lateness or results.Lateness()
        rows.append(
            [
                Cell(str(s.name)),
                Cell(f"{s.records:,}", "num"),
                Cell(f"{s.issued:,}", "num"),
                _skipped(s),
                Cell(num(s.trace_iops), "num"),
                Cell(num(s.achieved_iops), "num"),
                _rate_error(s),
                Cell(_us(late.p50_us), "num"),
                Cell(_us(late.p99_us), "num"),
                Cell(_us(late.max_us), "num"),
            ]
        )
    mode = replay.mode or "timed"
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
    return Section("replay", "Replay accuracy", [table], intro=replay.verdict or "")
