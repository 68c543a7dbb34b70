"""`run --until-steady`: one engine run measured in rounds until it is steady (SNIA PTS).

The run's measurement phase is cut into consecutive rounds of `--round` (a whole number of
snapshot intervals). After each round the tracked metric (total IOPS, or the p99 of every read
and write, merged) is added to the series and the steady-state rule (analysis/steady.py) is
applied to the last five rounds; once it holds, the monitor stops the run. The engine is planned
for `--max-rounds` rounds, so a run that never settles ends there ("not steady after N rounds",
with its trend).

When steady, the run's summary covers the measurement window (the last five rounds), computed
from their merged interval snapshots (histograms merged, never percentiles averaged); the whole
run's totals are kept beside it. Memory holds the current round and the window's five merged
rounds, whatever the run's length. A round cut short by Ctrl-C is not a round: the rounds before
it are kept and reported, and the run is incomplete as any interrupted run.

An open-loop workload is steady only at the rate it asked for: a window whose achieved IO rate
is below RATE_REACHED of the requested one is reported as not reaching it, and is not steady.
"""

from __future__ import annotations

import collections
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from tilemark.analysis.merging import MergedSnapshot, copy_snapshot, merge_snapshot
from tilemark.analysis.steady import RULE, WINDOW, WindowCheck, check_window, trend_pct_per_round
from tilemark.errors import UsageError
from tilemark.hist import Histogram, latency_hist
from tilemark.options import option
from tilemark.options.typed import Options
from tilemark.run.summary import summarize, target_iops
from tilemark.wording import counted, signed_pct
from tilemark.workload import plan

DEFAULT_ROUND_S = 60.0
DEFAULT_MAX_ROUNDS = 25  # SNIA PTS
RATE_REACHED = 0.95  # of an open-loop workload's requested IO rate
METRIC_UNITS = {"iops": "IOPS", "p99": "ms"}
NOT_PER_REPETITION = (
    "--until-steady applies to `tilemark run` and `tilemark scale`; each repetition of a repeat "
    "measures for --duration."
)


@dataclass(frozen=True)
class SteadySettings:
    """How an until-steady run is measured."""

    round_s: float = DEFAULT_ROUND_S
    max_rounds: int = DEFAULT_MAX_ROUNDS
    metric: str = "iops"

    @property
    def max_s(self) -> float:
        return self.round_s * self.max_rounds

    def describe(self) -> str:
        return (
            f"until {self.metric} is steady: rounds of {self.round_s:g}s, at most "
            f"{self.max_rounds} ({self.max_s:g}s)"
        )


def steady_settings(opts: Options) -> SteadySettings | None:
    """--until-steady and its round settings, checked; None without it."""
    given = opts.steady
    if not given.until_steady:
        for key in ("round", "max_rounds", "metric"):
            if getattr(given, key) is not None:
                flag = option("steady", key).flag
                raise UsageError(f"{flag} applies to steady-state runs; add --until-steady.")
        return None
    if "duration" in opts.workload.run:
        raise UsageError(
            "--duration does not apply with --until-steady: the run measures until it is steady, "
            "at most --max-rounds rounds of --round."
        )
    return SteadySettings(
        round_s=given.round if given.round is not None else SteadySettings.round_s,
        max_rounds=given.max_rounds if given.max_rounds is not None else SteadySettings.max_rounds,
        metric=given.metric if given.metric is not None else SteadySettings.metric,
    )


def check_round(settings: SteadySettings, interval_s: float) -> None:
    """A round must be a whole number of snapshot intervals."""
    ratio = settings.round_s / interval_s
    if ratio < 1 - 1e-9 or abs(ratio - round(ratio)) > 1e-6:
        raise UsageError(
            f"--round {settings.round_s:g}s must be a whole number of snapshot intervals "
            f"(--interval {interval_s:g}s), so every round has the same length."
        )


def steady_workload(workload: plan.Workload, settings: SteadySettings) -> plan.Workload:
    """The workload planned for `max_rounds` rounds; a round must be whole intervals."""
    check_round(settings, workload.interval_s)
    return dataclasses.replace(workload, duration_s=settings.max_s)


def metric_value(snap: dict[str, Any], metric: str) -> float | None:
    """The tracked metric of a merged snapshot: total data IOPS, or the p99 in ms of every
    read and write (response time for open loop, service time for closed loop), merged."""
    seconds = (snap["end_ns"] - snap["start_ns"]) / 1e9
    if metric == "iops":
        ops = sum(s[op]["ops"] for s in snap["streams"] for op in ("read", "write"))
        return ops / seconds if seconds > 0 else 0.0
    hist = Histogram.merged(
        latency_hist(s[op]) for s in snap["streams"] for op in ("read", "write")
    )
    p99 = hist.percentile(99.0)
    return None if p99 is None else p99 / 1e6


def shown_value(value: float | None, metric: str) -> str:
    """A metric value as people read it: '51,452 IOPS', '0.113 ms'."""
    if value is None:
        return "-"
    if metric == "iops":
        return f"{value:,.0f} IOPS"
    return f"{value:.3g} ms"


@dataclass
class Round:
    """One finished round: when, its metric and how many data IOs it completed."""

    index: int  # 1-based
    start_s: float  # from the start of the run's clock
    end_s: float
    value: float | None
    ops: int
    open_ops: int = 0  # data IOs completed by open-loop streams
    backlog_start: int = 0  # open-loop IOs behind schedule or in flight as the round began
    backlog_end: int = 0  # ... and as it ended

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class RoundMonitor:
    """A RunMonitor (runner.py) that aggregates interval snapshots into rounds, applies the
    steady-state rule after each round and stops the run once it holds."""

    compiled: dict[str, Any]
    settings: SteadySettings
    rounds: list[Round] = field(default_factory=list)
    check: WindowCheck | None = None
    _current: MergedSnapshot | None = None
    _backlog_start: int = 0  # open-loop backlog as the current round began
    _window: collections.deque = field(default_factory=lambda: collections.deque(maxlen=WINDOW))
    _lines: list[str] = field(default_factory=list)
    _backlog: int = 0  # open-loop backlog at the end of the latest snapshot

    def __post_init__(self) -> None:
        self._open = {
            i for i, s in enumerate(self.compiled["streams"]) if target_iops(s) is not None
        }

    def _open_backlog(self, snap: dict[str, Any]) -> int:
        return sum(
            int(s.get("behind_ios", 0)) + int(s.get("inflight", 0))
            for s in snap["streams"]
            if s["stream"] in self._open
        )

    @property
    def steady(self) -> bool:
        return self.check is not None and self.check.steady

    def values(self) -> list[float]:
        """The metric per round (a round without IO counts as 0)."""
        return [r.value or 0.0 for r in self.rounds]

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        for snap in snapshots:
            if snap["phase"] != "measure" or self.steady:
                self._backlog = self._open_backlog(snap)
                continue
            if self._current is None:
                # The round's streams are added up in place (MergedSnapshot), not merged
                # through JSON every interval (issue 25).
                self._current = MergedSnapshot(snap)
                self._backlog_start = self._backlog
            else:
                self._current.add(snap)
            self._backlog = self._open_backlog(snap)
            current = self._current
            if (current.end_ns - current.start_ns) / 1e9 >= self.settings.round_s - 1e-6:
                finished = current.render()
                finished["backlog_start"] = self._backlog_start
                self._finish_round(finished)
                self._current = None

    def _finish_round(self, snap: dict[str, Any]) -> None:
        ops = sum(s[op]["ops"] for s in snap["streams"] for op in ("read", "write"))
        value = metric_value(snap, self.settings.metric)
        open_ops = sum(
            s[op]["ops"]
            for s in snap["streams"]
            if s["stream"] in self._open
            for op in ("read", "write")
        )
        self.rounds.append(
            Round(
                len(self.rounds) + 1,
                snap["start_ns"] / 1e9,
                snap["end_ns"] / 1e9,
                value,
                ops,
                open_ops,
                snap.get("backlog_start", 0),
                self._open_backlog(snap),
            )
        )
        self._window.append(snap)
        self.check = check_window(self.values())
        self._lines.append(self.progress_line())

    def progress_line(self) -> str:
        """Rounds done, this round's metric, the window's status and the longest it may take."""
        r = self.rounds[-1]
        shown = shown_value(r.value, self.settings.metric)
        left = (self.settings.max_rounds - len(self.rounds)) * self.settings.round_s
        line = f"round {r.index}/{self.settings.max_rounds}: {self.settings.metric} {shown}"
        c = self.check
        if c is None:
            line += f"; window needs {counted(WINDOW - len(self.rounds), 'more round')}"
        else:
            state = "steady" if c.steady else "not steady"
            line += (
                f"; window rounds {c.first + 1}-{c.last + 1}: range {c.range_pct:.1f}% "
                f"({'ok' if c.range_ok else '> 20%'}), slope {signed_pct(c.slope_pct)} "
                f"({'ok' if c.slope_ok else '> 10%'}): {state}"
            )
        if not self.steady and left > 0:
            line += f"; at most {left:g}s more"
        return line

    def messages(self) -> list[str]:
        out, self._lines = self._lines, []
        return out

    def should_stop(self) -> str | None:
        return "steady" if self.steady else None

    def window_result(self) -> dict[str, Any] | None:
        """The steady window's merged snapshots in the engine's result format."""
        if not self._window:
            return None
        merged = copy_snapshot(self._window[0])
        for snap in list(self._window)[1:]:
            merge_snapshot(merged, snap)
        return {
            "complete": True,
            "measure_start_ns": merged["start_ns"],
            "measure_end_ns": merged["end_ns"],
            "streams": merged["streams"],
        }

    def analyze(self, compiled: dict[str, Any], result: dict[str, Any], summary: dict) -> None:
        """The Analyzer of runner.run_plan: a steady run's summary covers its window."""
        record = self.record()
        window = self.window_result() if self.steady else None
        if window is not None:
            whole = {"duration_s": summary["duration_s"], "total": summary["total"]}
            # What describes the whole run stays: its change points and notes.
            change_points, notes = summary.get("change_points"), summary.get("notes") or []
            summary.clear()
            summary.update(summarize(compiled, window))
            summary["change_points"] = change_points
            if notes:
                summary["notes"] = notes + [n for n in summary.get("notes", []) if n not in notes]
            summary["whole_run"] = whole
            record["window_streams"] = window["streams"]  # its merged counters and histograms
        rate = self.rate_check(self.rounds[-WINDOW:] if self.steady else self.rounds)
        if rate is not None:
            record["rate"] = rate
            if not rate["reached"] and record["steady"]:
                record["steady"] = False
        record["verdict"] = _verdict(record, self.settings)
        summary["steady_state"] = record
        if not record["steady"]:
            summary.setdefault("notes", []).append(record["verdict"])

    def rate_check(self, rounds: list[Round]) -> dict[str, Any] | None:
        """Did the open-loop streams keep up with their schedule over these rounds? IOs that
        came due = completed + growth of the backlog (behind schedule or in flight), so a
        Poisson schedule that drew fewer arrivals is not counted short (as QoS judges
        throughput, analysis/qos.py)."""
        if not self._open or not rounds:
            return None
        seconds = rounds[-1].end_s - rounds[0].start_s
        completed = sum(r.open_ops for r in rounds)
        due = completed + rounds[-1].backlog_end - rounds[0].backlog_start
        requested = sum(target_iops(self.compiled["streams"][i]) or 0.0 for i in self._open)
        return {
            "requested_iops": requested,
            "due_iops": due / seconds if seconds > 0 else 0.0,
            "achieved_iops": completed / seconds if seconds > 0 else 0.0,
            "achieved_pct": completed / due * 100 if due > 0 else 100.0,
            "reached": completed >= RATE_REACHED * due,
        }

    def record(self) -> dict[str, Any]:
        """What run.json keeps (summary.steady_state; docs/results-schema.md)."""
        c = self.check
        return {
            "metric": self.settings.metric,
            "unit": METRIC_UNITS[self.settings.metric],
            "round_s": self.settings.round_s,
            "max_rounds": self.settings.max_rounds,
            "rule": RULE,
            "rounds": [r.to_json() for r in self.rounds],
            "steady": self.steady,
            "rule_met": self.steady,
            "window": c.to_json() if c is not None else None,
            "summary_covers": "window" if self.steady else "whole run",
            "trend_pct_per_round": trend_pct_per_round(self.values()),
        }


def _verdict(record: dict[str, Any], settings: SteadySettings) -> str:
    """One sentence: steady (where), or not, with the trend."""
    rounds = len(record["rounds"])
    w = record["window"]
    rate = record.get("rate")
    if rate is not None and not rate["reached"]:
        return (
            f"the requested open-loop rate was not reached: {rate['achieved_iops']:,.0f} IOPS "
            f"completed of {rate['requested_iops']:,.0f} requested ({rate['achieved_pct']:.0f}% "
            "of the IOs that came due); steady at an "
            "unreachable rate is meaningless, so the run is not steady at that rate"
        )
    if record["steady"]:
        return (
            f"steady after {rounds} rounds: rounds {w['first_round']}-{w['last_round']} "
            f"average {shown_value(w['mean'], record['metric'])} (range {w['range_pct']:.1f}%, "
            f"slope {signed_pct(w['slope_pct'])}); the summary covers these {WINDOW} rounds"
        )
    trend = record["trend_pct_per_round"]
    moving = (
        f"; trend {signed_pct(trend)} per round over the last rounds" if trend is not None else ""
    )
    if rounds < WINDOW:
        return (
            f"not steady: only {counted(rounds, 'round')} measured, the window needs "
            f"{WINDOW}{moving}"
        )
    return (
        f"not steady after {rounds} rounds (range {w['range_pct']:.1f}%, slope "
        f"{signed_pct(w['slope_pct'])} over the last {WINDOW}){moving}"
    )
