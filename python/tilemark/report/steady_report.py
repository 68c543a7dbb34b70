"""The steady-state section of a run report (`run --until-steady`): the metric per round with
the measurement window, its band and slope line, and the rounds as a table."""

from __future__ import annotations

from typing import Any

from tilemark.hist import Histogram, latency_hist
from tilemark.report import charts
from tilemark.report.base import Cell, Figure, Section, Table
from tilemark.report.format import num
from tilemark.store import results


def window_hist(state: results.SteadyState, op: str) -> Histogram | None:
    """The merged latency histogram of one op over a steady run's window (None when the
    summary covers the whole run)."""
    streams = state.window_streams  # the engine result's shape (histograms), kept as read
    if not streams:
        return None
    return Histogram.merged(latency_hist(s.get(op)) for s in streams)


def steady_section(state: results.SteadyState) -> Section:
    """The rounds of an until-steady run (summary.steady_state)."""
    metric = state.metric
    y_title = "IOPS" if metric == "iops" else "p99 latency (ms)"
    window = state.window
    rounds = state.rounds or []
    round_s: Any = state.round_s  # an until-steady run always records its round
    figure = Figure(
        "steady-rounds",
        f"{metric} per round",
        charts.steady_rounds(rounds, window, title=f"{metric} per round", y_title=y_title),
        caption=(
            f"rounds of {round_s:g} s; shaded: the measurement window (last 5 rounds), "
            "dashed: its mean and +-10%, red: the least-squares line across it. Rule: "
            f"{state.rule}."
        ),
    )
    in_window: set[Any] = set()
    if window:
        in_window = set(range(window.first_round, window.last_round + 1))  # type: ignore[arg-type, operator]
    rows = [
        [
            Cell(str(r.index), "num"),
            Cell(f"{r.start_s:.1f}-{r.end_s:.1f}", "num"),
            Cell(num(r.value), "num"),
            Cell(f"{r.ops:,}", "num"),
            Cell("yes" if r.index in in_window else ""),
        ]
        for r in rounds
    ]
    table = Table(
        "steady-rounds-table",
        "Rounds",
        ["round", "time (s)", y_title, "IOs", "in window"],
        rows,
    )
    return Section("steady-state", "Steady state", [figure, table], intro=state.verdict)
