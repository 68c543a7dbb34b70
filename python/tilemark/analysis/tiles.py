"""Per-application results of a tile run: metrics in each application's own units, QoS
verdicts per instance, and the VMmark-style score.

Each instance, application and the tile run as a whole get a verdict: `pass`, `fail` (a
criterion decidedly failed) or `noise` (no decided failure, but a criterion whose confidence
interval straddles its limit: failed, within noise). The deciding criterion of a failure is the
one furthest past its limit, with its margin and confidence interval.

Score (methodology 4 and 11.3): each application's achieved metric is normalized to its target
(1.0 when it delivers what it was asked for); per tile the geometric mean of those ratios; the
score is the sum over tiles. Closed-loop workloads have no target and are left out of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from tilemark.analysis import expr
from tilemark.analysis.confidence import BatchSeries
from tilemark.analysis.qos import OPS, Verdict, evaluate, failures, undecided, worst
from tilemark.hist import latency_hist
from tilemark.run.summary import active_s, errors_by_name, errors_text, mean_io_size
from tilemark.wording import signed_pct
from tilemark.workload.apps import Profile, TileSpec
from tilemark.workload.tilelayout import TileLayout

DEFAULT_QOS_INTERVAL_S = 60.0


def _measured_s(result: dict) -> float:
    return max((result["measure_end_ns"] - result["measure_start_ns"]) / 1e9, 1e-9)


def _achieved(
    result: dict, indices: list[int], compiled: dict | None = None
) -> tuple[float, float, int]:
    """(IOPS of reads+writes, MB/s, errors) of some plan streams: each stream's rate over the
    part of the measured window it was active in (a phased stream is not rated over time it
    was idle), summed."""
    streams = (compiled or {}).get("streams") or []
    window = int(result["measure_start_ns"]), int(result["measure_end_ns"])
    iops = mbps = 0.0
    errors = 0
    for i in indices:
        s = result["streams"][i]
        secs = max(active_s(streams[i], *window), 1e-9) if i < len(streams) else None
        secs = secs or _measured_s(result)
        for op in ("read", "write"):
            iops += s[op]["ops"] / secs
            mbps += s[op]["bytes"] / 1e6 / secs
        errors += sum(sum(s[op]["errors"].values()) for op in ("read", "write", "sync"))
    return iops, mbps, errors


def _target(compiled: dict, indices: list[int]) -> tuple[float, float] | None:
    """(IOPS, MB/s) the plan asks of some streams; None if any is closed loop."""
    iops = mbps = 0.0
    for i in indices:
        s = compiled["streams"][i]
        arrival = s["arrival"]
        if arrival["kind"] != "open":
            return None
        size = mean_io_size(s["sizes"])
        rate = arrival.get("rate_iops") or arrival["rate_bps"] / size
        iops += rate
        mbps += rate * size / 1e6
    return iops, mbps


def _metric(profile: Profile, streams: dict[str, int], measure) -> float:
    """The profile's metric with iops()/mbps() measured by `measure(plan indices)`."""

    def pick(*names: str) -> list[int]:
        return [streams[n] for n in profile.expand(names)]

    funcs = {
        "iops": lambda *n: measure(pick(*n))[0],
        "mbps": lambda *n: measure(pick(*n))[1],
    }
    return expr.evaluate(profile.metric, profile.scale, funcs)


def _latency_columns(verdicts: list[Verdict]) -> dict[str, float | None]:
    """Window value of every latency criterion, by criterion id (for the seeds' tables)."""
    return {v.criterion: v.value for v in verdicts if v.scope == "window" and v.unit == "ms"}


def _stream_latency(result: dict, index: int) -> dict[str, float | None]:
    s = result["streams"][index]
    out: dict[str, float | None] = {}
    for op in ("read", "write"):
        h = latency_hist(s[op])
        out[f"{op}_mean_ms"] = None if h.n == 0 else h.mean() / 1e6
        out[f"{op}_p99_ms"] = None if h.n == 0 else h.percentile(99) / 1e6
    return out


def application_results(
    tile: TileSpec,
    layout: TileLayout,
    compiled: dict[str, Any],
    snapshots: Sequence[dict[str, Any]],
    result: dict[str, Any],
    *,
    qos_interval_s: float = DEFAULT_QOS_INTERVAL_S,
    batches: BatchSeries | None = None,
) -> dict[str, Any]:
    """Metrics, QoS verdicts and score of every application instance in a tile run."""
    profiles = {a.label: a.profile for a in tile.apps}
    instances: list[dict[str, Any]] = []
    order = {a.label: k for k, a in enumerate(tile.apps)}
    by_tile_then_app = sorted(
        layout.instances().items(), key=lambda kv: (kv[0][0], order[kv[0][1]])
    )
    for (t, app), streams in by_tile_then_app:
        profile = profiles[app]
        idx = list(streams.values())
        iops, mbps, errors = _achieved(result, idx, compiled)
        verdicts = evaluate(
            profile.qos, streams, snapshots, result, qos_interval_s, batches, compiled
        )
        if errors:
            named = errors_text(
                errors_by_name(*(result["streams"][i][op] for i in idx for op in OPS))
            )
            verdicts.append(
                Verdict(
                    "io_errors",
                    f"no IO errors, got {named}",
                    "window",
                    False,
                    float(errors),
                    0.0,
                    "errors",
                )  # fmt: skip
            )
        metric = _metric(profile, streams, lambda i: _achieved(result, i, compiled))
        target_of = _target(compiled, idx)
        target_metric = ratio = None
        if target_of is not None:
            target_metric = _metric(profile, streams, lambda i: _target(compiled, i) or (0, 0))
            ratio = metric / target_metric if target_metric else None
        failed = failures(verdicts)
        worst_v = worst(verdicts)
        instances.append(
            {
                "tile": t,
                "app": app,
                "profile": profile.name,
                "metric": metric,
                "metric_unit": profile.metric_unit,
                "target_metric": target_metric,
                "ratio": ratio,
                "passed": not failed,
                "verdict": _verdict_of(failed),
                "failed": [failure_text(v) for v in failed],
                "undecided": [v.criterion for v in undecided(verdicts)],
                "worst": None if worst_v is None else criterion_json(worst_v),
                "criteria": [criterion_json(v) for v in verdicts if v.scope == "window"],
                "latency_ms": _latency_columns(verdicts),
                "iops": iops,
                "mbps": mbps,
                "errors": errors,
                "streams": {n: _stream_latency(result, i) for n, i in streams.items()},
                "verdicts": [v.to_json() for v in verdicts],
            }
        )
    applications = _per_application(tile, instances)
    failing = [i for i in instances if not i["passed"]]
    deciding = max(
        (i for i in failing if i["worst"] is not None),
        key=lambda i: _severity(i["worst"]),
        default=None,
    )
    return {
        "tiles": max((i["tile"] for i in instances), default=0),
        "qos_interval_s": qos_interval_s,
        "instances": instances,
        "applications": applications,
        "passed": not failing,
        "verdict": _combined_verdict(i["verdict"] for i in instances),
        "failed": [f"t{i['tile']}.{i['app']}: {f}" for i in instances for f in i["failed"]],
        "undecided": [f"t{i['tile']}.{i['app']}: {c}" for i in instances for c in i["undecided"]],
        "deciding": None
        if deciding is None
        else {"tile": deciding["tile"], "app": deciding["app"], **deciding["worst"]},
        "score": score(instances),
    }


def _verdict_of(failed: list[Verdict]) -> str:
    if not failed:
        return "pass"
    return "fail" if any(v.decision == "fail" for v in failed) else "noise"


def _combined_verdict(verdicts: Any) -> str:
    seen = set(verdicts)
    for v in ("fail", "noise"):
        if v in seen:
            return v
    return "pass"


def criterion_json(v: Verdict) -> dict[str, Any]:
    """A verdict as study.json and reports keep it: value, limit, margin, CI, decision."""
    return {
        "criterion": v.criterion,
        "description": v.description,
        "scope": v.scope,
        "passed": v.passed,
        "decision": v.decision,
        "value": v.value,
        "limit": v.limit,
        "unit": v.unit,
        "margin_pct": v.margin_pct,
        "badness": v.badness if v.margin_pct is not None else None,
        "ci_low": v.ci_low,
        "ci_high": v.ci_high,
        "ci_bounded": v.ci_bounded,
        "samples": v.samples,
    }


def _value_text(value: float | None, unit: str) -> str:
    if unit == "fraction":
        return f"{value:.1%}" if value is not None else "nothing completed"
    if unit == "ms":
        return f"{value:.2f} ms" if value is not None else "no IO completed"
    return f"{value:g} {unit}"


def failure_text(v: Verdict) -> str:
    """One failed criterion: what, where, the value, and when it is within noise, its CI."""
    got = _value_text(v.value, v.unit)
    if v.decision == "inconclusive":
        ci = (
            f"{v.ci_low:.1%}-{v.ci_high:.1%}"  # a file rate's share of its minimum
            if v.unit == "fraction"
            else f"{v.ci_low:.2f}-{v.ci_high:.2f} ms"
        )
        got += f", inconclusive: 95% CI {ci} straddles the limit"
    return f"{v.description} ({v.scope}: {got})"


def _ms(v: float) -> str:
    """Milliseconds as people read them: 0.412, 7.75, 39.1, 4,591."""
    return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.3g}"


def margin_text(c: dict[str, Any]) -> str:
    """'read p99 39.1 ms vs 30 ms limit (+30%, CI 33.0-45.2 ms)' from criterion_json."""
    if c["unit"] == "fraction":
        what = f"{c['criterion']} {_value_text(c['value'], 'fraction')} vs >= {c['limit']:.0%}"
    elif c["value"] is None:
        return f"{c['criterion']}: no IO completed (limit {c['limit']:g} ms)"
    else:
        what = f"{c['criterion']} {_ms(c['value'])} ms vs {c['limit']:g} ms limit"
    extra = []
    if c.get("margin_pct") is not None:
        extra.append(f"{signed_pct(c['margin_pct'], 0)}")
    if c.get("ci_low") is not None and c["unit"] == "ms" and c["ci_low"] != c["ci_high"]:
        bound = "" if c.get("ci_bounded", True) else ", few samples"
        extra.append(f"CI {_ms(c['ci_low'])}-{_ms(c['ci_high'])} ms{bound}")
    elif c.get("ci_low") is not None and c["unit"] == "fraction":
        extra.append(f"CI {c['ci_low']:.1%}-{c['ci_high']:.1%}")  # a file rate's
    if c.get("decision") == "inconclusive":
        extra.append("inconclusive")
    if c.get("scope", "window") != "window":
        extra.append(c["scope"])
    return what + (f" ({', '.join(extra)})" if extra else "")


def _per_application(tile: TileSpec, instances: list[dict]) -> list[dict]:
    out = []
    for app in tile.apps:
        mine = [i for i in instances if i["app"] == app.label]
        if not mine:
            continue
        worst = worst_latency(mine)
        out.append(
            {
                "app": app.label,
                "profile": app.profile.name,
                "verdict": _combined_verdict(i["verdict"] for i in mine),
                "worst": _worst_of(mine),
                "failed_criteria": sum(len(i["failed"]) for i in mine),
                "criteria": _worst_criteria(mine),
                "metric_unit": app.profile.metric_unit,
                "metric_total": sum(i["metric"] for i in mine),
                "metric_per_instance": sum(i["metric"] for i in mine) / len(mine),
                "instances": len(mine),
                "passed": all(i["passed"] for i in mine),
                "worst_latency_ms": worst,
                "iops": sum(i["iops"] for i in mine),
                "mbps": sum(i["mbps"] for i in mine),
            }
        )
    return out


def worst_latency(instances: list[dict]) -> dict[str, float | None]:
    """Per latency criterion, its largest window value over the instances of an application."""
    worst: dict[str, float | None] = {}
    for i in instances:
        for cid, v in i["latency_ms"].items():
            if v is not None and (worst.get(cid) is None or v > worst[cid]):
                worst[cid] = v
            worst.setdefault(cid, v)
    return worst


def _badness(c: dict) -> float:
    """How far past its limit (percent); a criterion with no value (no IO) is the worst."""
    return c["badness"] if c["badness"] is not None else math.inf


def _severity(c: dict) -> tuple[bool, float]:
    """Decided failures first, then by how far past the limit."""
    return c["decision"] == "fail", _badness(c)


def _worst_of(instances: list[dict]) -> dict | None:
    worst_i = max(
        (i for i in instances if i["worst"] is not None),
        key=lambda i: _severity(i["worst"]),
        default=None,
    )
    return None if worst_i is None else {"tile": worst_i["tile"], **worst_i["worst"]}


def _worst_criteria(instances: list[dict]) -> list[dict]:
    """Per whole-window criterion, the instance nearest to (or furthest past) its limit."""
    by_id: dict[str, dict] = {}
    for i in instances:
        for c in i["criteria"]:
            have = by_id.get(c["criterion"])
            if have is None or _badness(c) > _badness(have):
                by_id[c["criterion"]] = {"tile": i["tile"], **c}
    return list(by_id.values())


def score(instances: list[dict]) -> float | None:
    """Sum over tiles of the geometric mean of achieved/target per application."""
    per_tile: dict[int, list[float]] = {}
    for i in instances:
        if i["ratio"] is not None and i["ratio"] > 0:
            per_tile.setdefault(i["tile"], []).append(i["ratio"])
    if not per_tile:
        return None
    return sum(math.exp(sum(map(math.log, r)) / len(r)) for r in per_tile.values())
