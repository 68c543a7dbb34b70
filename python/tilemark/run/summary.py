"""Per-stream and run-wide summaries of engine results and interval snapshots.

Input formats are docs/engine-boundary.md. Rates use the window the data covers (the
measurement phase for a result, the interval's own length for a snapshot); a stream with a
phase (start/stop) is rated over the part of the measurement phase it was active in, not over
time it was idle. MB/s is 10^6 bytes per second. Percentiles always come from merged
histograms (tilemark.hist), never from averaging percentiles. Stream and run totals count
data IOs (reads and writes); fsyncs are reported under "sync" and a replay's discards under
"discard", and neither is counted as IOPS or MB/s.
"""

from __future__ import annotations

import errno
from typing import Any

from tilemark.hist import Histogram, json_quantiles, latency_hist
from tilemark.run.pertarget import stream_targets, summarize_targets, target_names

OP_KINDS = ("read", "write", "sync")
DATA_OPS = ("read", "write")
# Only streams replaying a trace discard; the engine reports the kind for those streams alone.
REPLAY_KINDS = (*OP_KINDS, "discard")
NS_PER_MS = 1e6
NS_PER_S = 1e9
BYTES_PER_MB = 1e6


def errno_name(n: int | str) -> str:
    """Symbolic name of an errno ("EIO" for 5), or "errno N" when the number is unknown."""
    try:
        code = int(n)
    except (TypeError, ValueError):
        return str(n)
    return errno.errorcode.get(code, f"errno {code}")


def errors_by_name(*ops: dict | None) -> dict[str, int]:
    """IO errors of some op kinds by errno name ({"EIO": 12}), most frequent first."""
    out: dict[str, int] = {}
    for op in ops:
        for code, count in (op or {}).get("errors", {}).items():
            if int(count):
                name = errno_name(code)
                out[name] = out.get(name, 0) + int(count)
    return dict(sorted(out.items(), key=lambda kv: -kv[1]))


def errors_text(by_name: dict[str, int]) -> str:
    """'EIO 12, ENOSPC 3', or '0'."""
    return ", ".join(f"{name} {count:,}" for name, count in by_name.items()) or "0"


def _rate(amount: float, seconds: float) -> float:
    # A zero-length window (a run stopped during warm-up) has nothing measured: report 0.
    return amount / seconds if seconds > 0 else 0.0


def _ms(value_ns: float | None) -> float | None:
    return None if value_ns is None else value_ns / NS_PER_MS


def latency(hist: Histogram) -> dict[str, float | None]:
    """Mean, p50, p99, p99.9 and max of a histogram in milliseconds (None when empty)."""
    p50, p99, p999 = hist.quantiles((50.0, 99.0, 99.9))
    return {
        "mean_ms": _ms(hist.mean()),
        "p50_ms": _ms(p50),
        "p99_ms": _ms(p99),
        "p999_ms": _ms(p999),
        "max_ms": _ms(float(hist.max)) if hist.n else None,
    }


def _error_count(op: dict | None) -> int:
    return sum(int(c) for c in (op or {}).get("errors", {}).values())


def _has_activity(op: dict | None) -> bool:
    return bool(op) and (int(op.get("ops", 0)) > 0 or _error_count(op) > 0)


def _service(op: dict) -> Histogram:
    return Histogram.from_json(op.get("service"))


def _response(op: dict) -> Histogram:
    return latency_hist(op)


def op_summary(op: dict | None, seconds: float) -> dict[str, Any] | None:
    """OPSUM of one op kind over a window of `seconds`; None if it had no ops and no errors."""
    if not _has_activity(op):
        return None
    ops = int(op.get("ops", 0))
    nbytes = int(op.get("bytes", 0))
    return {
        "ops": ops,
        "bytes": nbytes,
        "iops": _rate(ops, seconds),
        "mbps": _rate(nbytes, seconds) / BYTES_PER_MB,
        "errors": {str(k): int(v) for k, v in op.get("errors", {}).items()},
        "service": latency(_service(op)),
        "response": latency(_response(op)),
    }


def mean_io_size(sizes: list[list[float]]) -> float | None:
    """Weighted mean IO size in bytes of a plan's size mix [[bytes, weight], ...]."""
    total_weight = sum(float(w) for _, w in sizes)
    if total_weight <= 0:
        return None
    return sum(float(s) * float(w) for s, w in sizes) / total_weight


def target_iops(plan_stream: dict) -> float | None:
    """Requested IO rate of an open-loop stream (rate_bps is converted with the mean size)."""
    arrival = plan_stream.get("arrival") or {}
    if arrival.get("kind") != "open":
        return None
    if arrival.get("rate_iops") is not None:
        return float(arrival["rate_iops"])
    if arrival.get("rate_bps") is not None:
        size = mean_io_size(plan_stream.get("sizes") or [])
        return float(arrival["rate_bps"]) / size if size else None
    return None


def _plan_stream(plan: dict, index: int) -> dict:
    streams = plan.get("streams") or []
    return streams[index] if 0 <= index < len(streams) else {}


def _arrival_kind(plan_stream: dict) -> str:
    return "open" if (plan_stream.get("arrival") or {}).get("kind") == "open" else "closed"


def phase_ns(plan_stream: dict) -> tuple[int, int | None]:
    """A stream's phase in run time (ns): [start, stop); stop None = the run's end."""
    start = plan_stream.get("start_ms")
    stop = plan_stream.get("stop_ms")
    return round(float(start or 0) * 1e6), None if stop is None else round(float(stop) * 1e6)


def is_phased(plan_stream: dict) -> bool:
    """True when a stream starts after the run or stops before its end."""
    return bool(plan_stream.get("start_ms")) or plan_stream.get("stop_ms") is not None


def gated_phase(plan_stream: dict, span: dict | None, end_ns: int) -> dict:
    """A stream that waited for others (plan `after`) with the phase it really had: from when
    the engine started it to when it ended (a stream that never started: none)."""
    if not plan_stream.get("after") or span is None:
        return plan_stream
    started, ended = span.get("started_ns"), span.get("ended_ns")
    start = end_ns if started is None else int(started)
    stop = end_ns if ended is None or started is None else int(ended)
    return {**plan_stream, "start_ms": start / 1e6, "stop_ms": stop / 1e6}


def active_s(
    plan_stream: dict, window_start_ns: int, window_end_ns: int, done_ns: int | None = None
) -> float:
    """Seconds of [window_start, window_end) (run time, ns) inside the stream's phase, up to
    `done_ns` when it finished its byte limit earlier (the engine's done_ns)."""
    start, stop = phase_ns(plan_stream)
    end = window_end_ns if stop is None else min(stop, window_end_ns)
    if done_ns:
        end = min(end, done_ns)
    return max(0, end - max(start, window_start_ns)) / NS_PER_S


def _priority(plan_stream: dict, counters: dict, data_ops: int, seconds: float) -> dict[str, Any]:
    """A stream's IO priority and, with a share at another one, the IOs done at it with their
    own rates and latency (the engine counts them apart, as fio's clat_prio):
    {"priority": {...}} or nothing for a stream without one."""
    own, share = plan_stream.get("ioprio"), plan_stream.get("ioprio_share")
    by_size = plan_stream.get("ioprio_by_size")
    if not own and not share and not by_size:
        return {}
    doc: dict[str, Any] = {"class": (own or {}).get("class", "none"), "level": 0}
    doc["level"] = int((own or {}).get("level", 0))
    if share:
        apart = counters.get("ioprio_other") or {}
        other = sum(int((apart.get(k) or {}).get("ops", 0)) for k in DATA_OPS)
        doc["share"] = {
            "class": share["class"],
            "level": int(share.get("level", 0)),
            "pct": float(share["pct"]),
            "ios": other,
            "measured_pct": 100.0 * other / data_ops if data_ops else None,
            **{k: op_summary(apart.get(k), seconds) for k in DATA_OPS},
        }
    if by_size:
        # Every IO not at the stream's own priority is counted apart, all such together.
        apart = counters.get("ioprio_other") or {}
        other = sum(int((apart.get(k) or {}).get("ops", 0)) for k in DATA_OPS)
        doc["by_size"] = {
            "entries": by_size,
            "ios": other,
            "measured_pct": 100.0 * other / data_ops if data_ops else None,
            **{k: op_summary(apart.get(k), seconds) for k in DATA_OPS},
        }
    return {"priority": doc}


def summarize(plan: dict, result: dict) -> dict[str, Any]:
    """Per-stream, per-target and run-wide totals, rates and latencies of an engine result."""
    measure = int(result["measure_start_ns"]), int(result["measure_end_ns"])
    duration_s = (measure[1] - measure[0]) / NS_PER_S
    names = target_names(plan)
    streams = []
    totals = {"read_ops": 0, "write_ops": 0, "read_bytes": 0, "write_bytes": 0, "errors": 0}
    named: dict[str, int] = {}
    for s in result.get("streams", []):
        index = int(s["stream"])
        plan_stream = _plan_stream(plan, index)
        spans = result.get("spans") or []
        span = spans[index] if index < len(spans) else None
        plan_stream = gated_phase(plan_stream, span, measure[1])
        arrival = _arrival_kind(plan_stream)
        # The measurement phase, or its part in the stream's phase and before it was done.
        # A stream stopped from outside (a [[steadystate]] rule) ended before its phase did;
        # the others are measured over the window, as the QoS windows measure them (a
        # stream's own end at the run's end lies a drain before the window's end).
        ended = (span or {}).get("ended_ns") if (span or {}).get("stopped") else None
        done = min(x for x in (s.get("done_ns"), ended, measure[1]) if x)
        seconds = active_s(plan_stream, *measure, done)
        kinds = REPLAY_KINDS if "discard" in s else OP_KINDS
        ops_by_kind = {kind: op_summary(s.get(kind), seconds) for kind in kinds}
        data_ops = sum(int((s.get(k) or {}).get("ops", 0)) for k in DATA_OPS)
        data_bytes = sum(int((s.get(k) or {}).get("bytes", 0)) for k in DATA_OPS)
        for kind in DATA_OPS:
            totals[f"{kind}_ops"] += int((s.get(kind) or {}).get("ops", 0))
            totals[f"{kind}_bytes"] += int((s.get(kind) or {}).get("bytes", 0))
        totals["errors"] += sum(_error_count(s.get(kind)) for kind in kinds)
        stream_errors = errors_by_name(*(s.get(kind) for kind in kinds))
        for name, count in stream_errors.items():
            named[name] = named.get(name, 0) + count
        start, stop = phase_ns(plan_stream)
        streams.append(
            {
                "name": plan_stream.get("name", f"stream{index}"),
                "stream": index,
                "arrival": arrival,
                "target_iops": target_iops(plan_stream),
                "targets": [
                    names[t] if t < len(names) else str(t) for t in stream_targets(plan_stream)
                ],
                "start_s": start / NS_PER_S if is_phased(plan_stream) else None,
                "stop_s": None if stop is None else stop / NS_PER_S,
                "active_s": seconds,
                **ops_by_kind,
                "total": {
                    "iops": _rate(data_ops, seconds),
                    "mbps": _rate(data_bytes, seconds) / BYTES_PER_MB,
                },
                "lag_max_ms": _ms(int(s.get("lag_max_ns", 0))) if arrival == "open" else None,
                "ios_issued_late": int(s.get("ios_issued_late", 0)),
                "errors_by_name": stream_errors,
                **_priority(plan_stream, s, data_ops, seconds),
            }
        )
    read_iops = _rate(totals["read_ops"], duration_s)
    write_iops = _rate(totals["write_ops"], duration_s)
    read_mbps = _rate(totals["read_bytes"], duration_s) / BYTES_PER_MB
    write_mbps = _rate(totals["write_bytes"], duration_s) / BYTES_PER_MB
    return {
        "streams": streams,
        "total": {
            "iops": read_iops + write_iops,
            "mbps": read_mbps + write_mbps,
            "read_iops": read_iops,
            "write_iops": write_iops,
            "read_mbps": read_mbps,
            "write_mbps": write_mbps,
            "errors": totals["errors"],
            "errors_by_name": dict(sorted(named.items(), key=lambda kv: -kv[1])),
        },
        "targets": summarize_targets(plan, result, duration_s),
        "duration_s": duration_s,
    }


def _merged_quantiles(docs: list[dict | None], ps: tuple[float, ...]) -> list[float | None]:
    """The quantiles of the histogram documents merged. With one that holds values (a stream
    or group doing one op kind: most of them), read from its document as it is; merging
    empty ones changes nothing."""
    held = [d for d in docs if d and d.get("n")]
    if len(held) <= 1:
        return json_quantiles(held[0] if held else None, ps)
    return Histogram.merged(held).quantiles(ps)


def interval_rows(plan: dict, snapshot: dict) -> list[dict[str, Any]]:
    """One row per stream of an interval snapshot: rates, p50/p99, lag and errors."""
    start_ns = int(snapshot["start_ns"])
    end_ns = int(snapshot["end_ns"])
    seconds = (end_ns - start_ns) / NS_PER_S
    rows = []
    for s in snapshot.get("streams", []):
        index = int(s["stream"])
        plan_stream = _plan_stream(plan, index)
        data = [s.get(k) for k in DATA_OPS if s.get(k)]
        read_ops = int((s.get("read") or {}).get("ops", 0))
        write_ops = int((s.get("write") or {}).get("ops", 0))
        data_bytes = sum(int(op.get("bytes", 0)) for op in data)
        # Open loop reports response time (what the application waited), closed loop service.
        latency = [op["response"] if op.get("response") is not None else op.get("service")
                   for op in data]  # fmt: skip
        p50, p99 = _merged_quantiles(latency, (50.0, 99.0))
        (service_p99,) = _merged_quantiles([op.get("service") for op in data], (99.0,))
        open_loop = _arrival_kind(plan_stream) == "open"
        rows.append(
            {
                "interval": int(snapshot["interval"]),
                "phase": snapshot.get("phase"),
                "start_s": start_ns / NS_PER_S,
                "end_s": end_ns / NS_PER_S,
                "stream": index,
                "name": plan_stream.get("name", f"stream{index}"),
                "iops": _rate(read_ops + write_ops, seconds),
                "mbps": _rate(data_bytes, seconds) / BYTES_PER_MB,
                "read_iops": _rate(read_ops, seconds),
                "write_iops": _rate(write_ops, seconds),
                "p50_ms": _ms(p50),
                "p99_ms": _ms(p99),
                "service_p99_ms": _ms(service_p99),
                "lag_max_ms": _ms(int(s.get("lag_max_ns", 0))) if open_loop else None,
                "behind_ios": int(s.get("behind_ios", 0)),
                "errors": sum(_error_count(s.get(kind)) for kind in REPLAY_KINDS),
                "errors_by_name": errors_by_name(*(s.get(kind) for kind in REPLAY_KINDS)),
            }
        )
    return rows
