"""Results per target: what each target of a run received (docs/results-schema.md, targets).

The engine counts per stream; a stream over several targets also counts per target
(`targets` in its counters, engine-boundary.md). A target's figures are then the sum of its
one-target streams' counters and of its share of the others'; latency histograms merge
(response time for open-loop streams, service time for closed loop, as everywhere).

`summarize_targets` gives summary["targets"]; `interval_rows` a live view line per target;
`target_rows` the rows of targets.parquet, written for runs with more than one target (a
one-target run's per-target figures are its totals).
"""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa

from tilemark.hist import LATENCY_STATS, Histogram, latency_hist
from tilemark.store.layout import SCHEMA_VERSION, VERSION_KEY

OP_KINDS = ("read", "write", "sync")
DATA_OPS = ("read", "write")
TARGETS_FILE = "targets.parquet"
TARGETS_LOG = "targets.arrows"

TARGET_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("interval", pa.int32()),
        ("phase", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("target", pa.int32()),
        ("target_name", pa.string()),
        ("op", pa.string()),
        ("ops", pa.int64()),
        ("bytes", pa.int64()),
        ("errors", pa.int64()),
        *[(f"latency_{s}_us", pa.float64()) for s in LATENCY_STATS],
        ("latency_hist", pa.string()),
    ],
    metadata={VERSION_KEY: str(SCHEMA_VERSION).encode()},
)


def stream_targets(plan_stream: dict[str, Any]) -> list[int]:
    """The plan targets a stream goes to: its regions' (plan 2), or its one `target` (plan 1)."""
    regions = plan_stream.get("regions")
    if regions:
        return [int(r["target"]) for r in regions]
    return [int(plan_stream.get("target") or 0)]


def target_names(plan: dict[str, Any]) -> list[str]:
    """The plan's targets by name (their path's when a plan predates names)."""
    return [
        str(t.get("name") or t.get("path") or f"target {i}")
        for i, t in enumerate(plan.get("targets") or [])
    ]


def parts(plan: dict[str, Any], counters: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """(target, {read, write, sync}) pieces of one stream's counters."""
    if counters.get("targets"):
        return [(int(p["target"]), p) for p in counters["targets"]]
    streams = plan.get("streams") or []
    index = int(counters["stream"])
    plan_stream = streams[index] if 0 <= index < len(streams) else {}
    return [(stream_targets(plan_stream)[0], counters)]


class _Acc:
    """One target's counters of one op kind, added up."""

    __slots__ = ("ops", "bytes", "errors", "hist")

    def __init__(self) -> None:
        self.ops = 0
        self.bytes = 0
        self.errors: dict[str, int] = {}
        self.hist = Histogram()

    def add(self, op: dict[str, Any] | None) -> None:
        if not op:
            return
        self.ops += int(op.get("ops", 0))
        self.bytes += int(op.get("bytes", 0))
        for code, n in (op.get("errors") or {}).items():
            self.errors[str(code)] = self.errors.get(str(code), 0) + int(n)
        if op.get("ops"):
            self.hist.merge(latency_hist(op))

    def error_count(self) -> int:
        return sum(self.errors.values())


def accumulate(plan: dict[str, Any], streams: list[dict[str, Any]]) -> dict[int, dict[str, _Acc]]:
    """Per plan target, per op kind: the counters of every stream's part on it."""
    out: dict[int, dict[str, _Acc]] = {
        i: {k: _Acc() for k in OP_KINDS} for i in range(len(plan.get("targets") or []))
    }
    for counters in streams:
        for target, part in parts(plan, counters):
            accs = out.setdefault(target, {k: _Acc() for k in OP_KINDS})
            for kind in OP_KINDS:
                accs[kind].add(part.get(kind))
    return out


def _ms(ns: float | None) -> float | None:
    return None if ns is None else ns / 1e6


def _rate(amount: float, seconds: float) -> float:
    return amount / seconds if seconds > 0 else 0.0


def summarize_targets(
    plan: dict[str, Any], result: dict[str, Any], duration_s: float
) -> list[dict[str, Any]]:
    """summary["targets"]: per target, rates over the measurement window, errors, and read and
    write latency (merged histograms)."""
    names = target_names(plan)
    plan_targets = plan.get("targets") or []
    streams_on: dict[int, list[str]] = {}
    for i, s in enumerate(plan.get("streams") or []):
        for t in stream_targets(s):
            streams_on.setdefault(t, []).append(str(s.get("name", f"stream{i}")))
    out = []
    for target, accs in sorted(accumulate(plan, result.get("streams") or []).items()):
        read, write = accs["read"], accs["write"]
        row: dict[str, Any] = {
            "target": target,
            "name": names[target] if target < len(names) else f"target {target}",
            "path": (plan_targets[target] if target < len(plan_targets) else {}).get("path"),
            "streams": streams_on.get(target, []),
            "iops": _rate(read.ops + write.ops, duration_s),
            "mbps": _rate(read.bytes + write.bytes, duration_s) / 1e6,
            "read_iops": _rate(read.ops, duration_s),
            "write_iops": _rate(write.ops, duration_s),
            "read_mbps": _rate(read.bytes, duration_s) / 1e6,
            "write_mbps": _rate(write.bytes, duration_s) / 1e6,
            "read_ops": read.ops,
            "write_ops": write.ops,
            "read_bytes": read.bytes,
            "write_bytes": write.bytes,
            "sync_ops": accs["sync"].ops,
            "errors": sum(a.error_count() for a in accs.values()),
        }
        for kind, acc in (("read", read), ("write", write)):
            row[f"{kind}_latency"] = {f"{k}_ms": _ms(v) for k, v in acc.hist.stats().items()}
        out.append(row)
    return out


def interval_rows(plan: dict[str, Any], snapshot: dict[str, Any]) -> list[dict[str, Any]]:
    """Per target, one interval's rates (no latency: counts are cheap enough for every
    interval of the live view)."""
    seconds = (int(snapshot["end_ns"]) - int(snapshot["start_ns"])) / 1e9
    names = target_names(plan)
    totals: dict[int, list[int]] = {i: [0, 0, 0] for i in range(len(names))}
    for counters in snapshot.get("streams") or []:
        for target, part in parts(plan, counters):
            t = totals.setdefault(target, [0, 0, 0])
            for kind in DATA_OPS:
                op = part.get(kind) or {}
                t[0] += int(op.get("ops", 0))
                t[1] += int(op.get("bytes", 0))
            for kind in OP_KINDS:
                t[2] += sum(int(n) for n in ((part.get(kind) or {}).get("errors") or {}).values())
    return [
        {
            "target": i,
            "name": names[i] if i < len(names) else f"target {i}",
            "iops": _rate(ops, seconds),
            "mbps": _rate(nbytes, seconds) / 1e6,
            "errors": errors,
        }
        for i, (ops, nbytes, errors) in sorted(totals.items())
    ]


def target_rows(run_id: str, plan: dict[str, Any], snapshot: dict[str, Any]) -> list[dict]:
    """targets.parquet rows of one snapshot: per target and op kind with ops or errors (a
    target without any gets one row with op null, so every interval has every target)."""
    names = target_names(plan)
    base = {
        "run_id": run_id,
        "interval": int(snapshot["interval"]),
        "phase": snapshot.get("phase"),
        "start_ns": int(snapshot["start_ns"]),
        "end_ns": int(snapshot["end_ns"]),
    }
    rows = []
    for target, accs in sorted(accumulate(plan, snapshot.get("streams") or []).items()):
        head = {
            **base,
            "target": target,
            "target_name": names[target] if target < len(names) else None,
        }
        mine = []
        for kind in OP_KINDS:
            acc = accs[kind]
            if not acc.ops and not acc.error_count():
                continue
            h = acc.hist
            mine.append(
                {
                    **head,
                    "op": kind,
                    "ops": acc.ops,
                    "bytes": acc.bytes,
                    "errors": acc.error_count(),
                    **{
                        f"latency_{k}_us": None if v is None else v / 1e3
                        for k, v in h.stats().items()
                    },
                    "latency_hist": json.dumps(h.to_json(), separators=(",", ":")) if h.n else None,
                }
            )
        rows.extend(mine or [{**head, "op": None, "ops": 0, "bytes": 0, "errors": 0}])
    return rows
