"""QoS criteria of a file workload: a latency statistic of one operation (or of a sequence's
whole loop) under a limit, or its rate above one; judged over the run's totals (merged
histograms, never averaged percentiles), each with its 95% confidence interval and decided
`pass`, `fail` or `inconclusive` as block applications' criteria are (analysis/qos.py).

    [qos.fsync_p99]
    stream = "mail"
    op = "fsync"       # an operation, or "loop" (a sequence's whole loop: one message)
    stat = "p99"       # mean, p50, p99, p999, max (with max_ms) or rate (with min_rate, per s)
    max_ms = 20
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from tilemark.errors import UsageError
from tilemark.options import NAME_RE, shown

STATS = ("mean", "p50", "p99", "p999", "max", "rate")
QOS_KEYS = ("stream", "op", "stat", "max_ms", "min_rate")


@dataclass(frozen=True)
class QosSpec:
    name: str
    stream: str
    op: str  # an operation name or "loop"
    stat: str
    limit: float  # ms for latency stats, per second for rate

    def describe(self) -> str:
        if self.stat == "rate":
            return f"{self.stream} {self.op} rate >= {self.limit:g}/s"
        return f"{self.stream} {self.op} {self.stat} <= {self.limit:g} ms"


@dataclass(frozen=True)
class QosVerdict:
    name: str
    criterion: str
    value: float | None  # ms, or per second; None when nothing was measured
    passed: bool
    decision: str = ""  # pass | fail | inconclusive (its 95% interval straddles the limit)
    ci_low: float | None = None  # the 95% interval of `value`, same unit
    ci_high: float | None = None


def parse_qos(doc: object, streams: dict[str, bool], ops: tuple[str, ...]) -> tuple[QosSpec, ...]:
    """The [qos.NAME] tables; `streams` maps each stream name to whether it is a sequence."""
    if doc is None:
        return ()
    if not isinstance(doc, dict):
        raise UsageError("qos must be tables [qos.NAME] (stream, op, stat, max_ms or min_rate).")
    out = []
    for name, t in doc.items():
        where = f"qos '{name}'"
        if not NAME_RE.fullmatch(name) or not isinstance(t, dict):
            raise UsageError(f"{where} must be a table named in letters, digits and _.:+-.")
        extra = sorted(set(t) - set(QOS_KEYS))
        if extra:
            raise UsageError(
                f"{where}: unknown key '{extra[0]}'; allowed keys are {', '.join(QOS_KEYS)}."
            )
        stream = t.get("stream")
        if stream not in streams:
            raise UsageError(
                f"{where}: stream must name a [[filestream]] ({', '.join(streams)}), got "
                f"{shown(stream)}."
            )
        op = t.get("op", "loop" if streams[stream] else None)
        if op not in ops and not (op == "loop" and streams[stream]):
            allowed = ", ".join(ops) + (", loop" if streams[stream] else "")
            raise UsageError(f"{where}: op must be one of {allowed}, got {shown(op)}.")
        stat = t.get("stat", "p99")
        if stat not in STATS:
            raise UsageError(f"{where}: stat must be one of {', '.join(STATS)}, got {shown(stat)}.")
        key = "min_rate" if stat == "rate" else "max_ms"
        other = "max_ms" if stat == "rate" else "min_rate"
        limit = t.get(key)
        if other in t or isinstance(limit, bool) or not isinstance(limit, int | float):
            raise UsageError(f"{where}: stat {stat} takes {key} (a number), not {other}.")
        if not (limit > 0 and math.isfinite(limit)):
            raise UsageError(f"{where}: {key} must be > 0, got {limit!r}.")
        out.append(QosSpec(name, stream, op, stat, float(limit)))
    return tuple(out)


def verdict(
    spec: QosSpec,
    op_doc: dict[str, Any] | None,
    seconds: float,
    latency_batches: list[tuple[int, int]] | None = None,
    rate_batches: list[tuple[int, int]] | None = None,
) -> Any:
    """A criterion judged as block applications' are (analysis/qos.py: a Verdict with its 95%
    confidence interval, `pass`, `fail` or `inconclusive`): a latency by analysis.qos.check
    itself (order statistics for percentiles; batch means of `latency_batches`, per interval
    (operations, latency sum), for the mean; max as what happened); a rate as the fraction of
    its minimum achieved, its interval by batch means of `rate_batches` (per interval (ns,
    operations)): with fewer than four intervals it is decided on its value."""
    from tilemark.analysis.confidence import ratio_interval
    from tilemark.analysis.qos import Criterion, Verdict, Window, check
    from tilemark.hist import latency_hist

    if spec.stat == "rate":
        n = int((op_doc or {}).get("ops", 0))
        value = n / seconds / spec.limit if seconds > 0 else None
        ci = ratio_interval(rate_batches or ())
        if value is None:
            decision = "fail"
        elif ci is None:
            decision = "pass" if value >= 1.0 else "fail"
        else:
            ci = type(ci)(ci.low * 1e9 / spec.limit, ci.high * 1e9 / spec.limit)
            decision = ci.decide_at_least(1.0)
        return Verdict(spec.name, spec.describe(), "window", decision == "pass", value, 1.0,
                       "fraction", 0.0, seconds, decision, None if ci is None else ci.low,
                       None if ci is None else ci.high, samples=n)  # fmt: skip
    criterion = Criterion(spec.name, (spec.stream,), spec.stat, spec.op, max_ms=spec.limit)
    window = Window(0.0, seconds, latency={spec.op: latency_hist(op_doc)})
    return check(criterion, window, "window", latency_batches)
