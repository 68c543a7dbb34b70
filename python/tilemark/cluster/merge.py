"""Merging what the hosts measured into the run's intervals and result.

Every host reports its streams under its own (local) indexes; `globalize` renames them to the
run's (global) indexes. A global stream that runs on several hosts (a workload stream nobody
pinned) is the sum of its copies: counts and bytes add, errors add per errno, latency
histograms merge bucket by bucket (tilemark.hist), a stream over several targets adds its
per-target parts target by target, lag and in-flight figures take the worst or the sum as
their meaning asks, and verification counts add. Percentiles of merged data are therefore
read from merged histograms, never averaged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from tilemark.hist import Histogram

OP_KINDS = ("read", "write", "sync")
_SUMMED = ("behind_ios", "inflight", "ios_issued_late")
_LARGEST = ("lag_max_ns", "oldest_inflight_ns")
_INTERVAL_ONLY = ("behind_ios", "inflight", "oldest_inflight_ns")  # not in a result
LISTED_FINDINGS = 1000  # as the engine lists at most


def globalize(streams: Iterable[dict[str, Any]], index: list[int]) -> list[dict[str, Any]]:
    """A host's per-stream counters with `stream` set to the global index."""
    return [{**s, "stream": index[int(s["stream"])]} for s in streams]


def _merge_hist(a: dict | None, b: dict | None) -> dict | None:
    if a is None:
        return b
    if b is None:
        return a
    return Histogram.merged([a, b]).to_json()


def merge_op(a: dict | None, b: dict | None) -> dict | None:
    """Two hosts' counters of one op kind, added."""
    if a is None:
        return b
    if b is None:
        return a
    errors = dict(a.get("errors") or {})
    for code, count in (b.get("errors") or {}).items():
        errors[code] = int(errors.get(code, 0)) + int(count)
    return {
        "ops": int(a.get("ops", 0)) + int(b.get("ops", 0)),
        "bytes": int(a.get("bytes", 0)) + int(b.get("bytes", 0)),
        "errors": errors,
        "service": _merge_hist(a.get("service"), b.get("service")),
        "response": _merge_hist(a.get("response"), b.get("response")),
    }


def merge_stream(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Two hosts' counters of the same global stream, added."""
    out = {**a}
    for kind in OP_KINDS:
        out[kind] = merge_op(a.get(kind), b.get(kind))
    for key in _LARGEST:
        if key in a or key in b:
            out[key] = max(int(a.get(key, 0)), int(b.get(key, 0)))
    for key in _SUMMED:
        if key in a or key in b:
            out[key] = int(a.get(key, 0)) + int(b.get(key, 0))
    if a.get("targets") or b.get("targets"):
        out["targets"] = merge_parts(a.get("targets") or [], b.get("targets") or [])
    return out


def merge_parts(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Two hosts' per-target parts of a stream over several targets (every host has the
    workload's targets at the same indexes), added target by target."""
    by_target = {int(p["target"]): dict(p) for p in a}
    for p in b:
        t = int(p["target"])
        mine = by_target.setdefault(t, {"target": t})
        for kind in OP_KINDS:
            mine[kind] = merge_op(mine.get(kind), p.get(kind))
    return [by_target[t] for t in sorted(by_target)]


def merge_streams(*lists: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Global per-stream counters from several hosts, one entry per stream, by index."""
    by_index: dict[int, dict[str, Any]] = {}
    for streams in lists:
        for s in streams:
            i = int(s["stream"])
            by_index[i] = merge_stream(by_index[i], s) if i in by_index else dict(s)
    return [by_index[i] for i in sorted(by_index)]


def merge_snapshots(snaps: list[dict[str, Any]]) -> dict[str, Any]:
    """One interval of the run from the hosts' snapshots of it (streams already global)."""
    first = snaps[0]
    return {
        "interval": int(first["interval"]),
        "phase": first.get("phase"),
        "start_ns": min(int(s["start_ns"]) for s in snaps),
        "end_ns": max(int(s["end_ns"]) for s in snaps),
        "streams": merge_streams(*(s["streams"] for s in snaps)),
    }


def merge_results(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's result from the hosts' results (streams already global)."""
    hung = [h for r in results for h in r.get("hung") or []]
    hung.sort(key=lambda h: -int(h.get("age_ns", 0)))
    reasons = [r.get("stop_reason") for r in results if r.get("stop_reason")]
    return {
        "complete": all(bool(r.get("complete")) for r in results),
        "stop_reason": reasons[0] if reasons else None,
        "started_at_ns": min(int(r.get("started_at_ns") or 0) for r in results),
        "measure_start_ns": max(int(r.get("measure_start_ns", 0)) for r in results),
        "measure_end_ns": max(int(r.get("measure_end_ns", 0)) for r in results),
        "streams": merge_streams(*(r.get("streams") or [] for r in results)),
        "hung": hung[:64],
        "hung_count": sum(int(r.get("hung_count", len(r.get("hung") or []))) for r in results),
        "verification": merge_verification([r.get("verification") for r in results]),
    }


def merge_verification(found: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """The hosts' verification counts added, their findings listed in order of run time (each
    names its host); None when no host verified."""
    found_on = [v for v in found if v is not None]
    if not found_on:
        return None
    by_class: dict[str, int] = {}
    for v in found_on:
        for name, count in (v.get("by_class") or {}).items():
            by_class[name] = by_class.get(name, 0) + int(count)
    findings = [f for v in found_on for f in v.get("findings") or []]
    findings.sort(key=lambda f: (f.get("time_ns") or 0, f.get("offset") or 0))
    out: dict[str, Any] = {
        k: sum(int(v.get(k) or 0) for v in found_on)
        for k in ("checked", "skipped", "not_tilemark", "later", "total")
    }
    return {**out, "by_class": by_class, "findings": findings[:LISTED_FINDINGS]}


class Totals:
    """A host's measurement-phase totals from its snapshots, for a host whose own result never
    arrived (it was lost): the engine's result is the sum of the same intervals."""

    def __init__(self) -> None:
        self.streams: list[dict[str, Any]] = []
        self.measure_start_ns: int | None = None
        self.end_ns = 0

    def add(self, snap: dict[str, Any]) -> None:
        self.end_ns = max(self.end_ns, int(snap["end_ns"]))
        if snap.get("phase") != "measure":
            return
        if self.measure_start_ns is None:
            self.measure_start_ns = int(snap["start_ns"])
        clean = [{k: v for k, v in s.items() if k not in _INTERVAL_ONLY} for s in snap["streams"]]
        self.streams = merge_streams(self.streams, clean)

    def result(self, started_at_ns: int) -> dict[str, Any]:
        start = self.measure_start_ns if self.measure_start_ns is not None else self.end_ns
        return {
            "complete": False,
            "stop_reason": "lost",
            "started_at_ns": started_at_ns,
            "measure_start_ns": start,
            "measure_end_ns": max(self.end_ns, start),
            "streams": self.streams,
            "hung": [],
            "hung_count": 0,
        }
