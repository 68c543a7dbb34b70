"""A run that ends on fio's steady-state criterion (`[steadystate]`, workload/steadyrule.py).

The monitor sums the judged streams' interval snapshots into samples of `sample` seconds,
beginning `ramp` after the streams start (after the run's warm-up: fio restarts a job's clock
when its ramp_time ends, libfio.c reset_all_stats), as fio's steadystate_check does every
ss_interval for the jobs of a reporting group: each stream's IOs and bytes become a rate with
fio's integer arithmetic and the rates are summed; latency is the streams' summed service
time over their completions (fio's clat). Once `window` seconds of samples are in, every new
sample is judged (analysis/fio_steady.py) and the first window that meets the criterion stops
the run, as fio_mark_td_terminate stops the group's jobs. A run that never meets it runs to its
duration and says so. run.json `summary.fio_steady_state` keeps the rule, whether and when it
was met, every sample and the last window's figures; the summary itself covers the whole run,
as fio's does.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field
from typing import Any

from tilemark.analysis.fio_steady import UNITS, Judgement, judge, lat_sample, rate_sample
from tilemark.workload import plan
from tilemark.workload.steadyrule import SteadyRule

OPS = ("read", "write", "discard")  # fio's DDIR_RWDIR_CNT: reads, writes, trims


@dataclass
class FioSteadyMonitor:
    """A RunMonitor (runner.py) for fio's steady-state rule."""

    rule: SteadyRule
    streams: list[int]  # plan indices of the judged streams
    begin_s: float  # run time from which samples are taken
    samples: list[int] = field(default_factory=list)
    sample_ends_s: list[float] = field(default_factory=list)
    last: Judgement | None = None
    met_at_s: float | None = None
    _current: dict[str, Any] | None = None
    _window: collections.deque = field(default_factory=collections.deque)
    _lines: list[str] = field(default_factory=list)

    @classmethod
    def for_workload(cls, workload: plan.Workload) -> FioSteadyMonitor:
        """The monitor of a workload with a `[steadystate]` rule."""
        rule = workload.steadystate
        assert rule is not None
        judged = rule.judged([s.name for s in workload.streams])
        starts = [workload.streams[i].start_s or 0.0 for i in judged]
        begin = max(min(starts, default=0.0), workload.warmup_s) + rule.ramp_s
        return cls(rule, judged, begin)

    def __post_init__(self) -> None:
        self._window = collections.deque(maxlen=self.rule.samples)
        self._judged = set(self.streams)

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        for snap in snapshots:
            if self.met_at_s is not None or snap["start_ns"] / 1e9 < self.begin_s - 1e-6:
                continue
            current = self._current
            if current is None:
                current = self._current = {
                    "start_ns": snap["start_ns"],
                    "rates": {},  # per stream: [ios, bytes]
                    "lat_sum": 0.0,
                    "lat_n": 0,
                }
            current["end_ns"] = snap["end_ns"]
            for s in snap["streams"]:
                if s["stream"] not in self._judged:
                    continue
                counts = current["rates"].setdefault(s["stream"], [0, 0])
                for op in OPS:
                    o = s.get(op)
                    if not o:
                        continue
                    counts[0] += int(o.get("ops", 0))
                    counts[1] += int(o.get("bytes", 0))
                    service = o.get("service") or {}
                    current["lat_sum"] += float(service.get("sum", 0))
                    current["lat_n"] += int(service.get("n", 0))
            if (current["end_ns"] - current["start_ns"]) / 1e9 >= self.rule.sample_s - 1e-6:
                self._finish(current)
                self._current = None

    def sample_value(self, current: dict[str, Any]) -> int:
        """fio's sample of one check (steadystate_check): per stream, then summed."""
        metric = self.rule.fio_criterion().metric
        if metric == "lat":
            return lat_sample(current["lat_sum"], current["lat_n"])
        rate_time_ms = (current["end_ns"] - current["start_ns"]) // 1_000_000
        interval_ms = round(self.rule.sample_s * 1000)
        which = 0 if metric == "iops" else 1
        return sum(
            rate_sample(counts[which], rate_time_ms, interval_ms)
            for counts in current["rates"].values()
        )

    def _finish(self, current: dict[str, Any]) -> None:
        value = self.sample_value(current)
        end_s = current["end_ns"] / 1e9
        self.samples.append(value)
        self.sample_ends_s.append(end_s)
        self._window.append(value)
        if len(self._window) < self.rule.samples:
            return
        self.last = judge(list(self._window), self.rule.fio_criterion())
        if self.last.met:
            self.met_at_s = end_s
            self._lines.append(
                f"fio's steady-state criterion {self.rule.fio_criterion().describe()} is met "
                f"at {end_s:g}s: {self._figures()}"
            )

    def _figures(self) -> str:
        j = self.last
        if j is None:
            return "no full window"
        unit = UNITS[self.rule.fio_criterion().metric]
        what = (
            f"slope {j.slope:.6g} {unit} per sample"
            if j.slope is not None
            else f"largest deviation {j.deviation:.6g} {unit}"
        )
        shown = f"{j.value:.4g}%" if self.rule.percent else f"{j.value:.6g}"
        return f"window mean {j.mean:.6g} {unit}, {what} (criterion {shown})"

    def messages(self) -> list[str]:
        out, self._lines = self._lines, []
        return out

    def should_stop(self) -> str | None:
        return "fio-steady" if self.met_at_s is not None else None

    def record(self) -> dict[str, Any]:
        """run.json `summary.fio_steady_state`."""
        r = self.rule
        window = list(self._window)
        return {
            "rule": "fio",
            "criterion": r.fio_criterion().describe(),
            "metric": r.fio_criterion().metric,
            "unit": UNITS[r.fio_criterion().metric],
            "window_s": r.window_s,
            "ramp_s": r.ramp_s,
            "sample_s": r.sample_s,
            "window_samples": r.samples,
            "streams": self.streams,
            "begins_s": self.begin_s,
            "met": self.met_at_s is not None,
            "met_at_s": self.met_at_s,
            "samples": self.samples,
            "sample_ends_s": self.sample_ends_s,
            "window": window if len(window) == r.samples else None,
            "judgement": self.last.to_json() if self.last is not None else None,
            "verdict": self.verdict(),
        }

    def verdict(self) -> str:
        """One sentence: met (when, the window's figures) or not."""
        c = self.rule.fio_criterion().describe()
        if self.met_at_s is not None:
            return (
                f"fio's steady-state criterion {c} was met at {self.met_at_s:g}s; {self._figures()}"
            )
        if self.last is None:
            return (
                f"fio's steady-state criterion {c} was not judged: {len(self.samples)} of the "
                f"window's {self.rule.samples} samples were taken before the run ended"
            )
        return (
            f"fio's steady-state criterion {c} was not met by the end of the run; last "
            f"{self._figures()}"
        )

    def analyze(self, compiled: dict[str, Any], result: dict[str, Any], summary: dict) -> None:
        """The Analyzer of runner.run_plan: the rule's record beside the summary."""
        record = self.record()
        summary["fio_steady_state"] = record
        if not record["met"]:
            summary.setdefault("notes", []).append(record["verdict"])
