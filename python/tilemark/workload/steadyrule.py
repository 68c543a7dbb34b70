"""`[steadystate]` in a workload file: the run ends once fio's steady-state criterion holds.

    [steadystate]
    criterion = "iops"      # iops, iops_slope, bw, bw_slope, lat, lat_slope (fio's names)
    limit = "10%"           # a percentage of the window's mean, or a number: IOPS, B/s, ns
    window = "30s"          # fio's ss_dur: the rolling window
    ramp = "10s"            # fio's ss_ramp: from the judged streams' start (after warm-up)
    sample = "1s"           # fio's ss_interval: one sample per this much IO (default 1s)
    streams = ["writers"]   # optional: the streams judged together (default: every stream;
                            # a stream with copies names them all)
    ends = "run"            # "run" (default): the run ends; "streams": only the judged
                            # streams stop, and streams waiting for them (`after`) start

Several rules are an array, `[[steadystate]]`, each with its `streams` (fio's reporting groups,
each judged and ended on its own); at most one of them ends the run.

This is fio's rule with fio's arithmetic (analysis/fio_steady.py), beside tilemark's own
`--until-steady` (SNIA PTS rounds, run/steady.py). The run (every stream) ends when the
criterion is met, or at its duration; run.json `summary.fio_steady_state` says which, when,
and the window's samples and figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilemark.analysis.fio_steady import CRITERIA, Criterion, window_samples
from tilemark.errors import UsageError
from tilemark.units import parse_duration

KEYS = ("criterion", "limit", "window", "ramp", "sample", "streams", "ends")
ENDS = ("run", "streams")
WHERE = "[steadystate]"


@dataclass(frozen=True)
class SteadyRule:
    """fio's steady-state rule as a workload runs it."""

    criterion: str  # one of CRITERIA
    limit: float
    percent: bool
    window_s: float
    ramp_s: float = 0.0
    sample_s: float = 1.0
    streams: tuple[str, ...] = ()  # names given; () judges every stream
    ends: str = "run"  # "run" | "streams": what a met criterion stops

    def fio_criterion(self) -> Criterion:
        metric, _, slope = self.criterion.partition("_")
        return Criterion(metric, bool(slope), self.limit, self.percent)

    @property
    def samples(self) -> int:
        return window_samples(self.window_s, self.sample_s)

    def describe(self) -> str:
        ramp = f" after {self.ramp_s:g}s" if self.ramp_s else ""
        return (
            f"ends when fio's steady-state criterion {self.fio_criterion().describe()} holds "
            f"over {self.window_s:g}s ({self.samples} samples of {self.sample_s:g}s){ramp}"
        )

    def judged(self, names: list[str]) -> list[int]:
        """Indices of the judged streams among `names` (a name also covers its copies)."""
        if not self.streams:
            return list(range(len(names)))
        return [
            i for i, n in enumerate(names) if n in self.streams or n.split("@")[0] in self.streams
        ]


def parse_steadystate(table: object, stream_names: list[str], interval_s: float) -> SteadyRule:
    """The `[steadystate]` table, checked against the workload's streams and its snapshot
    interval; raises UsageError naming the key."""
    if not isinstance(table, dict):
        raise UsageError(f"{WHERE} must be a table of keys ({', '.join(KEYS)}).")
    for key in table:
        if key not in KEYS:
            raise UsageError(f"{WHERE}: unknown key '{key}'; allowed keys are {', '.join(KEYS)}.")
    for key in ("criterion", "limit", "window"):
        if key not in table:
            raise UsageError(f"{WHERE} needs {key} (criterion, limit and window are required).")
    criterion = table["criterion"]
    if criterion not in CRITERIA:
        raise UsageError(
            f"{WHERE} criterion must be one of {', '.join(CRITERIA)} (fio's names), "
            f"got {criterion!r}."
        )
    limit, percent = _limit(table["limit"])
    window_s = parse_duration(table["window"], f"{WHERE} window")
    ramp_s = parse_duration(table.get("ramp", 0), f"{WHERE} ramp")
    sample_s = parse_duration(table.get("sample", 1.0), f"{WHERE} sample")
    if sample_s <= 0 or not _whole(sample_s, interval_s):
        raise UsageError(
            f"{WHERE} sample {sample_s:g}s must be a whole number of snapshot intervals "
            f"(interval {interval_s:g}s)."
        )
    if not _whole(window_s, sample_s) or window_s <= sample_s:
        # fio refuses the same (init.c: "ss_duration must be multiple of ss_check_interval").
        raise UsageError(
            f"{WHERE} window {window_s:g}s must be a whole number of samples ({sample_s:g}s), "
            "and more than one."
        )
    streams = table.get("streams", [])
    if isinstance(streams, str):
        streams = [streams]
    if not isinstance(streams, list) or not all(isinstance(s, str) for s in streams):
        raise UsageError(f"{WHERE} streams must be a list of stream names.")
    ends = table.get("ends", "run")
    if ends not in ENDS:
        raise UsageError(f"{WHERE} ends must be run or streams, got {ends!r}.")
    rule = SteadyRule(criterion, limit, percent, window_s, ramp_s, sample_s, tuple(streams), ends)
    for name in streams:
        if not rule.judged([n for n in stream_names if n == name or n.split("@")[0] == name]):
            raise UsageError(
                f"{WHERE} streams names {name!r}, which is not a stream of this workload."
            )
    return rule


def parse_rules(value: object, stream_names: list[str], interval_s: float) -> list[SteadyRule]:
    """`[steadystate]` (one rule) or `[[steadystate]]` (several, each ending its streams or at
    most one the run); [] when absent."""
    if value is None:
        return []
    if not isinstance(value, list):
        return [parse_steadystate(value, stream_names, interval_s)]
    rules = [parse_steadystate(t, stream_names, interval_s) for t in value]
    if sum(r.ends == "run" for r in rules) > 1:
        raise UsageError(
            f"{WHERE}: at most one rule may end the run (the others: ends = 'streams')."
        )
    judged = [set(r.judged(stream_names)) for r in rules if r.ends == "streams"]
    for i, a in enumerate(judged):
        for b in judged[i + 1 :]:
            if a & b:
                name = stream_names[min(a & b)]
                raise UsageError(
                    f"{WHERE}: stream {name!r} is judged by two rules that end streams."
                )
    return rules


def _limit(value: Any) -> tuple[float, bool]:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UsageError(f"{WHERE} limit must be a number or a percentage ('10%').")
    text = str(value).strip()
    percent = text.endswith("%")
    try:
        limit = float(text.rstrip("%").strip())
    except ValueError:
        raise UsageError(
            f"{WHERE} limit must be a number or a percentage ('10%'), got {value!r}."
        ) from None
    if not limit > 0 or limit == float("inf"):
        raise UsageError(f"{WHERE} limit must be above 0, got {value!r}.")
    return limit, percent


def _whole(value: float, unit: float) -> bool:
    ratio = value / unit
    return ratio >= 1 - 1e-9 and abs(ratio - round(ratio)) < 1e-6


def rule_json(rule: SteadyRule | None) -> dict[str, Any] | None:
    """The rule as a workload document's table (what import-fio writes)."""
    if rule is None:
        return None
    out: dict[str, Any] = {
        "criterion": rule.criterion,
        "limit": f"{rule.limit:g}%" if rule.percent else rule.limit,
        "window": f"{rule.window_s:g}s",
    }
    if rule.ramp_s:
        out["ramp"] = f"{rule.ramp_s:g}s"
    if rule.sample_s != 1.0:
        out["sample"] = f"{rule.sample_s:g}s"
    if rule.streams:
        out["streams"] = list(rule.streams)
    if rule.ends != "run":
        out["ends"] = rule.ends
    return out
