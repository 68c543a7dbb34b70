"""Two repetitions are a before/after comparison: the change, its 95% interval, and whether it
is beyond noise (`tilemark repeat 2 ... --between 'tier-now'`, docs/studies.md).

A trend needs three repetitions; two give one difference, whose uncertainty comes from within
each run. Each run's measured intervals are cut into at most `MAX_BATCHES` consecutive batches
(batch means: one interval's IOs are correlated, batches much less so); a metric's standard
error in a run is the spread of its batch values over the square root of their count. The
difference after - before gets a Welch t interval (Welch-Satterthwaite degrees of freedom),
stated in % of the before value. A metric's verdict:

- `decaying` / `improving`: it moved by more than the noise floor (5%) in the worse / better
  direction and the interval lies wholly on that side of zero;
- `stable`: the whole interval lies within +-the noise floor;
- `inconclusive`: otherwise (the runs are too short or too noisy to tell).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tilemark.analysis.confidence import t95
from tilemark.analysis.trend import DECAYING, IMPROVING, INCONCLUSIVE, NOISE_FLOOR_PCT, STABLE

MAX_BATCHES = 16
MIN_BATCHES = 2
# The metrics a run's batches are kept for (repetition_metrics names, scope "total").
BATCHED = ("IOPS", "MB/s", "read latency mean", "write latency mean")
_COLUMNS = ["interval", "phase", "start_ns", "end_ns", "op", "ops", "bytes"] + [
    "response_mean_us",
    "service_mean_us",
]


def interval_spread(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per BATCHED metric, its standard error over the run's measured intervals in batches
    (`{"se": ..., "batches": k}`); metrics without data, or a run without readable intervals,
    are left out."""
    from tilemark.store.intervals import IntervalsUnreadable, interval_source, read_source

    try:
        table = read_source(interval_source(Path(run_dir)), _COLUMNS)
    except (IntervalsUnreadable, OSError):
        return {}
    per_interval: dict[int, dict[str, float]] = {}
    for row in table.to_pylist():
        if row["phase"] != "measure" or row["op"] not in ("read", "write"):
            continue
        slot = per_interval.setdefault(
            row["interval"],
            {"s": (row["end_ns"] - row["start_ns"]) / 1e9, "ops": 0, "bytes": 0},
        )
        ops = row["ops"] or 0
        slot["ops"] += ops
        slot["bytes"] += row["bytes"] or 0
        mean_us = row["response_mean_us"]
        if mean_us is None:
            mean_us = row["service_mean_us"]
        if ops and mean_us is not None:
            slot[f"{row['op']}_ops"] = slot.get(f"{row['op']}_ops", 0) + ops
            slot[f"{row['op']}_lat"] = slot.get(f"{row['op']}_lat", 0.0) + mean_us * ops
    return batch_errors([per_interval[k] for k in sorted(per_interval)])


def batch_errors(intervals: list[dict[str, float]]) -> dict[str, dict[str, float]]:
    """Standard errors of BATCHED metrics from per-interval sums (`s` seconds, `ops`, `bytes`,
    `read_ops`, `read_lat` (us x ops), `write_ops`, `write_lat`)."""
    k = min(MAX_BATCHES, len(intervals))
    if k < MIN_BATCHES:
        return {}
    batches: list[dict[str, float]] = []
    for b in range(k):
        part = intervals[b * len(intervals) // k : (b + 1) * len(intervals) // k]
        summed: dict[str, float] = {}
        for slot in part:
            for key, v in slot.items():
                summed[key] = summed.get(key, 0.0) + v
        batches.append(summed)
    values: dict[str, list[float]] = {name: [] for name in BATCHED}
    for b in batches:
        if b.get("s"):
            values["IOPS"].append(b["ops"] / b["s"])
            values["MB/s"].append(b["bytes"] / 1e6 / b["s"])
        for op in ("read", "write"):
            if b.get(f"{op}_ops"):
                values[f"{op} latency mean"].append(b[f"{op}_lat"] / b[f"{op}_ops"] / 1e3)
    out = {}
    for name, vs in values.items():
        if len(vs) >= MIN_BATCHES:
            mean = sum(vs) / len(vs)
            sd = math.sqrt(sum((v - mean) ** 2 for v in vs) / (len(vs) - 1))
            out[name] = {"se": sd / math.sqrt(len(vs)), "batches": len(vs)}
    return out


def compare(before: dict[str, Any], after: dict[str, Any], better: str) -> dict[str, Any] | None:
    """The change of one metric between two repetitions (their metric entries, with `value`,
    `se` and `batches`): `change_pct`, `ci_pct` (95%), `beyond_noise` and `verdict`; None when
    either lacks a value or a spread."""
    b, a = before.get("value"), after.get("value")
    if b is None or a is None or not b or before.get("se") is None or after.get("se") is None:
        return None
    se_b, se_a = before["se"], after["se"]
    se = math.sqrt(se_b**2 + se_a**2)
    if se > 0:
        # Welch-Satterthwaite degrees of freedom from each run's batches.
        terms = [(s**4 / (n - 1)) for s, n in ((se_b, before["batches"]), (se_a, after["batches"]))]
        df = int(se**4 / sum(terms)) if sum(terms) > 0 else 1
        half = t95(max(df, 1)) * se
    else:
        half = 0.0
    change = (a - b) / b * 100.0
    low, high = (a - b - half) / b * 100.0, (a - b + half) / b * 100.0
    sign = 1.0 if better == "higher" else -1.0
    gain, lo, hi = sign * change, *sorted((sign * low, sign * high))
    beyond = (lo > 0 or hi < 0) and abs(change) > NOISE_FLOOR_PCT
    if gain < -NOISE_FLOOR_PCT and hi < 0:
        v = DECAYING
    elif gain > NOISE_FLOOR_PCT and lo > 0:
        v = IMPROVING
    elif -NOISE_FLOOR_PCT <= lo and hi <= NOISE_FLOOR_PCT:
        v = STABLE
    else:
        v = INCONCLUSIVE
    return {"change_pct": change, "ci_pct": [low, high], "beyond_noise": beyond, "verdict": v}
