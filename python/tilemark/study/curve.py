"""The load/latency curve of one workload, and the highest rate that meets an objective.

1. **Maximum IOPS** (closed loop): queue depth 1, 2, 4, ... until IOPS grow by no more than
   2% over the previous depth (or `max_qd`); the maximum is the highest IOPS seen.
2. **Offered loads** (open loop, rate-driven arrivals): each load is a percentage of that
   maximum (default 10, 20, ... 100 and 110%). Latency is response time: from each IO's
   scheduled arrival, so queueing in front of the device is counted (no coordinated omission).
3. **The objective** (`--slo 'p99<=2ms'`): every open-loop step is judged against it with the
   QoS machinery (analysis/qos.py): each latency bound by its 95% confidence interval (pass,
   fail, or inconclusive = failed within noise), and the offered rate must be achieved (at
   least 95% of the IOs that came due completed). Between the highest passing load and the
   lowest failing one above it, rates are bisected (judged steps, failures confirmed like any
   study step) until the two are within 1% of the maximum IOPS.

The knee is the first offered load from which on the p99 response time stays above twice its
low-load value (the smallest p99 at loads up to half the maximum): where queueing starts to
dominate (docs/studies.md).
"""

from __future__ import annotations

import re
from typing import Any

from tilemark.analysis.qos import (
    LATENCY_STATS,
    Criterion,
    SnapshotCompactor,
    evaluate,
)
from tilemark.errors import UsageError
from tilemark.options import MAX_QD
from tilemark.run.outcome import RunOutcome
from tilemark.study.base import FAIL, NEW, NOISE, PASS, StepBook, StepRecord, StepSpec, Study
from tilemark.study.points import device_fields
from tilemark.units import MAX_IOPS

GROWTH = 0.02  # the maximum is found when IOPS grow by no more than this
PRECISION = 0.01  # the SLO search ends when pass and fail are this close (of the maximum)
MAX_BISECTIONS = 16
THROUGHPUT_FRACTION = 0.95  # an objective also needs the offered rate delivered
KNEE_FACTOR = 2.0  # the knee: p99 above this multiple of its value at the lowest load
OPEN_LOOP_QD = 64  # at least this many IOs in flight in open loop (plan.DEFAULT_OPEN_LOOP_QD)
STREAM = "curve"


def parse_slo(text: str | None) -> list[Criterion]:
    """'p99<=2ms' or 'p99<=2ms,p50<=0.5ms' -> latency criteria of the curve's stream."""
    if text is None:
        return []
    allowed = ", ".join(sorted(LATENCY_STATS))
    criteria = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*([a-z0-9]+)\s*(<=|<)\s*(\S+)\s*", part.lower())
        if not m or m[1] not in LATENCY_STATS:
            raise UsageError(
                f"--slo must be STAT<=TIME with STAT one of {allowed}, e.g. 'p99<=2ms' (several "
                f"joined by commas), got {text!r}."
            )
        limit = re.fullmatch(r"(\d+(?:\.\d*)?|\.\d+)(us|ms|s)?", m[3])
        if not limit:
            raise UsageError(
                f"--slo limits are times such as 2ms, 500us or 0.01s (a bare number is ms), got "
                f"{text!r}."
            )
        max_ms = float(limit[1]) * {"us": 1e-3, "ms": 1.0, "s": 1e3, None: 1.0}[limit[2]]
        if max_ms <= 0:
            raise UsageError(f"--slo limits must be above 0, got {text!r}.")
        criteria.append(Criterion(id=m[1], streams=(STREAM,), stat=m[1], max_ms=max_ms))
    return criteria


def slo_text(criteria: list[Criterion]) -> str:
    return ",".join(f"{c.stat}<={c.max_ms:g}ms" for c in criteria)


def judge_slo(
    criteria: list[Criterion], outcome: RunOutcome, compactor: SnapshotCompactor
) -> tuple[str, dict[str, Any]]:
    """pass / fail / noise of an open-loop run against the objective, and the verdicts."""
    throughput = Criterion(
        id="throughput", streams=(STREAM,), stat="throughput", min_fraction=THROUGHPUT_FRACTION
    )
    snapshots = compactor.snapshots()
    verdicts = evaluate([*criteria, throughput], {STREAM: 0}, snapshots, outcome.result)
    window = [v for v in verdicts if v.scope == "window"]
    if all(v.decision == "pass" for v in window):
        verdict = PASS
    elif any(v.decision == "fail" for v in window):
        verdict = FAIL
    else:
        verdict = NOISE
    return verdict, {"slo_verdict": verdict, "slo_criteria": [v.to_json() for v in window]}


class CurveStudy(Study):
    """Maximum IOPS, the offered-load ladder, and the SLO bisection (module doc)."""

    kind = "curve"
    answer_key = "max_iops"

    def __init__(
        self,
        *,
        loads_pct: list[float],
        max_qd: int,
        slo: list[Criterion],
        definition: dict[str, Any],
    ):
        self.loads = loads_pct
        self.max_qd = max_qd
        self.slo = slo
        self._definition = definition

    def definition(self) -> dict[str, Any]:
        return {
            **self._definition,
            "kind": self.kind,
            "loads_pct": self.loads,
            "max_qd": self.max_qd,
            "growth_pct": GROWTH * 100,
            "slo": slo_text(self.slo) if self.slo else None,
            "slo_precision_pct": PRECISION * 100,
            "knee_rule": f"the first load from which on p99 stays above {KNEE_FACTOR:g}x the "
            "smallest p99 at loads up to 50% of the maximum",
        }

    # -- steps -------------------------------------------------------------------------------

    def _spec(self, book: StepBook, label: str, **params: Any) -> StepSpec:
        return StepSpec(key=len(book) + 1, label=label, params=params)

    @staticmethod
    def _phase(book: StepBook, phase: str) -> list[StepRecord]:
        return [s for s in book.by_key() if s.spec.params["phase"] == phase]

    @staticmethod
    def _iops(step: StepRecord) -> float:
        last = step.attempts[-1] if step.attempts else None
        stats = ((last.detail if last else {}).get("groups") or {}).get("stream") or {}
        return float(stats.get("iops") or 0.0)

    def maximum(self, book: StepBook) -> tuple[float, int] | None:
        """(max IOPS, its queue depth) once the search has ended, else None."""
        probes = self._phase(book, "max")
        if not probes:
            return None
        iops = [self._iops(s) for s in probes]
        last_qd = probes[-1].spec.params["qd"]
        flat = len(iops) >= 2 and iops[-1] <= iops[-2] * (1 + GROWTH)
        if not (flat or last_qd >= self.max_qd):
            return None
        best = max(range(len(iops)), key=lambda i: iops[i])
        return iops[best], probes[best].spec.params["qd"]

    def _judged(self, step: StepRecord) -> str | None:
        """A step's verdict against the objective: judged steps by their runs' majority,
        load steps by their one run."""
        if step.spec.params["phase"] == "slo":
            return step.verdict
        last = step.attempts[-1] if step.attempts else None
        v = (last.detail if last else {}).get("slo_verdict")
        return None if v is None else (PASS if v == PASS else FAIL)

    def bracket(self, book: StepBook) -> tuple[float | None, float | None]:
        """(highest passing rate, lowest failing rate above it) among open-loop steps."""
        judged = [
            (s.spec.params["rate"], self._judged(s))
            for s in book.by_key()
            if s.spec.params["phase"] in ("load", "slo")
        ]
        passed = [r for r, v in judged if v == PASS]
        best = max(passed, default=None)
        failed = [r for r, v in judged if v == FAIL and (best is None or r > best)]
        return best, min(failed, default=None)

    def next_step(self, book: StepBook) -> tuple[StepSpec, str] | None:
        probes = self._phase(book, "max")
        found = self.maximum(book)
        if found is None:
            qd = 1 if not probes else min(probes[-1].spec.params["qd"] * 2, self.max_qd)
            return self._spec(book, f"closed loop QD{qd}", phase="max", qd=qd), NEW
        max_iops, qd_at_max = found
        if max_iops <= 0:
            return None
        # Open loop: the queue depth caps IOs in flight; arrivals beyond it wait (and count).
        cap = min(max(OPEN_LOOP_QD, 4 * qd_at_max), MAX_QD)
        done = {s.spec.params.get("pct") for s in self._phase(book, "load")}
        for pct in self.loads:
            if pct not in done:
                rate = max_iops * pct / 100.0
                if rate > MAX_IOPS:
                    continue  # beyond what one stream can schedule; the answer notes it
                label = f"open loop {pct:g}% of max: {rate:,.0f} IOPS"
                return self._spec(book, label, phase="load", pct=pct, rate=rate, qd=cap), NEW
        if not self.slo or len(self._phase(book, "slo")) >= MAX_BISECTIONS:
            return None
        best, worst = self.bracket(book)
        if worst is None:
            return None  # every load meets it (or none was judged)
        low = best if best is not None else 0.0
        if worst - low <= PRECISION * max_iops:
            return None
        rate = (low + worst) / 2
        label = f"SLO search: {rate:,.0f} IOPS ({rate / max_iops:.1%} of max)"
        pct = rate / max_iops * 100
        return self._spec(book, label, phase="slo", pct=pct, rate=rate, qd=cap), NEW

    # -- answer ------------------------------------------------------------------------------

    def point(self, step: StepRecord) -> dict[str, Any]:
        p = step.spec.params
        last = step.deciding()  # the run that stands for the step
        stats = ((last.detail if last else {}).get("groups") or {}).get("stream") or {}
        return {
            "phase": p["phase"],
            "qd": p["qd"],
            "offered_pct": p.get("pct"),
            "offered_iops": p.get("rate"),
            "iops": stats.get("iops"),
            "mbps": stats.get("mbps"),
            "mean_ms": stats.get("mean_ms"),
            "p50_ms": stats.get("p50_ms"),
            "p99_ms": stats.get("p99_ms"),
            "p999_ms": stats.get("p999_ms"),
            "verdict": self._shown_verdict(step) if self.slo and p["phase"] != "max" else None,
            **device_fields(step),
            "run_id": last.run_id if last else None,
        }

    def _shown_verdict(self, step: StepRecord) -> str | None:
        """pass, fail, or noise (failed within noise: a bound's interval straddled its limit)."""
        verdict = self._judged(step)
        if verdict != FAIL:
            return verdict
        if step.spec.params["phase"] == "slo":
            return NOISE if step.within_noise else FAIL
        last = step.attempts[-1] if step.attempts else None
        return (last.detail if last else {}).get("slo_verdict") or FAIL

    def knee(self, book: StepBook) -> dict[str, Any] | None:
        """The first offered load from which on p99 stays above KNEE_FACTOR x the low-load p99
        (the smallest p99 at loads up to half the maximum: one noisy light load does not set
        it)."""
        loads = sorted(
            (self.point(s) for s in self._phase(book, "load")), key=lambda p: p["offered_pct"]
        )
        loads = [p for p in loads if p["p99_ms"] is not None]
        if len(loads) < 2:
            return None
        light = [p for p in loads if p["offered_pct"] <= 50] or loads[:1]
        base_point = min(light, key=lambda p: p["p99_ms"])
        base = base_point["p99_ms"]
        above = [p for p in loads if p["offered_pct"] > base_point["offered_pct"]]
        knee = None
        for p in reversed(above):
            if p["p99_ms"] <= KNEE_FACTOR * base:
                break
            knee = p
        if knee is None:
            return None
        return {
            "offered_pct": knee["offered_pct"],
            "offered_iops": knee["offered_iops"],
            "iops": knee["iops"],
            "p99_ms": knee["p99_ms"],
            "base_p99_ms": base,
            "base_offered_pct": base_point["offered_pct"],
        }

    def answer(self, book: StepBook) -> dict[str, Any]:
        found = self.maximum(book)
        best, worst = self.bracket(book) if self.slo else (None, None)
        return {
            "max_iops": found[0] if found else None,
            "qd_at_max": found[1] if found else None,
            "slo_iops": best if self.slo else None,
            "slo_first_failing_iops": worst if self.slo else None,
            "slo_limited_by_loads": bool(self.slo) and best is not None and worst is None,
            "knee": self.knee(book),
            "loads_skipped_pct": [
                p for p in self.loads if found and found[0] * p / 100.0 > MAX_IOPS
            ],
            "points": [self.point(s) for s in book.by_key()],
        }

    def step_json(self, step: StepRecord) -> dict[str, Any]:
        out = super().step_json(step)
        last = step.deciding()
        detail = last.detail if last else {}
        return {
            **out,
            "point": self.point(step),
            "groups": detail.get("groups"),
            "total": detail.get("total"),
            "device": detail.get("device"),
            "tool_bound": detail.get("tool_bound"),
            "measured_s": detail.get("measured_s"),
            "slo_criteria": detail.get("slo_criteria"),
            "error": detail.get("error"),
        }
