"""How faithfully a replay kept to its traces: the `replay` section of a replayed run's summary
(docs/results-schema.md, Replay) and the lines the terminal prints from it.

Per stream, from the engine's replay counters (docs/engine-boundary.md): how many records were
issued against how many the run should have issued (`skipped` must be 0), the rate the trace
asks for against the rate achieved (both over the records issued: the recorded times of the
first and last, and their submissions), and, for timed replays, the lateness of every issue
against its recorded time (a merged histogram: p50, p99, max).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tilemark.hist import Histogram

NS_PER_S = 1e9
NS_PER_US = 1e3


@dataclass(frozen=True)
class StreamExpectation:
    """What one replayed stream should do: its list, and what the trace says."""

    name: str
    trace: str
    group: str | None
    records: int  # records in one pass of its list
    expected: int | None  # records the run must issue (None: afap/qd cut by --duration)
    ops: dict[str, int]  # records per op in one pass
    rounded: int  # IOs widened to the target's alignment
    trace_iops: float  # the trace's rate times the speed, over its own span
    trace_span_s: float  # first to last recorded issue, divided by the speed
    mode: str = "timed"


def timed(expect: StreamExpectation) -> bool:
    return expect.mode == "timed"


def _rate(count: int, span_ns: int | None) -> float | None:
    if count < 2 or not span_ns:
        return None
    return (count - 1) / (span_ns / NS_PER_S)


def _lateness(hist: Histogram) -> dict[str, float | None] | None:
    if not hist.n:
        return None
    us = lambda v: None if v is None else v / NS_PER_US  # noqa: E731
    return {
        "mean_us": us(hist.mean()),
        "p50_us": us(hist.percentile(50.0)),
        "p99_us": us(hist.percentile(99.0)),
        "max_us": us(float(hist.max)),
    }


def _pct(achieved: float | None, wanted: float | None) -> float | None:
    if achieved is None or not wanted:
        return None
    return 100.0 * (achieved / wanted - 1.0)


def stream_accuracy(
    expect: StreamExpectation, counters: dict[str, Any] | None, complete: bool
) -> dict[str, Any]:
    """One stream's entry of `replay.streams`."""
    counters = counters or {}
    issued = int(counters.get("issued") or 0)
    submit_span = (counters.get("last_submit_ns") or 0) - (counters.get("first_submit_ns") or 0)
    due_span = (counters.get("last_due_ns") or 0) - (counters.get("first_due_ns") or 0)
    achieved = _rate(issued, submit_span)
    intended = _rate(issued, due_span)
    # Timed: against the rate the recorded times of the same IOs ask for (the trace's rate
    # over what was replayed, loops and cuts included); afap and qd: against the trace's.
    wanted = intended if timed(expect) else expect.trace_iops
    skipped = None
    if complete and expect.expected is not None:
        skipped = max(0, expect.expected - issued)
    lateness = Histogram.from_json(counters.get("lateness"))
    return {
        "name": expect.name,
        "trace": expect.trace,
        "group": expect.group,
        "records": expect.records,
        "expected": expect.expected,
        "issued": issued,
        "skipped": skipped,
        "not_reached": (
            max(0, expect.records - issued)
            if expect.expected is None and issued < expect.records
            else 0
        ),
        "ops": expect.ops,
        "rounded": expect.rounded,
        "trace_iops": expect.trace_iops,
        "trace_span_s": expect.trace_span_s,
        "intended_iops": intended,
        "achieved_iops": achieved,
        "rate_error_pct": _pct(achieved, wanted),
        "replay_span_s": submit_span / NS_PER_S if issued else None,
        "lateness": _lateness(lateness),
        "_lateness_hist": counters.get("lateness"),
    }


def summarize_replay(
    settings: dict[str, Any],
    expectations: list[StreamExpectation],
    result: dict[str, Any],
) -> dict[str, Any]:
    """The summary's `replay` section of an engine result."""
    by_index = {int(s["stream"]): s.get("replay") for s in result.get("streams") or []}
    complete = bool(result.get("complete"))
    streams = [stream_accuracy(e, by_index.get(i), complete) for i, e in enumerate(expectations)]
    merged = Histogram.merged(Histogram.from_json(s.pop("_lateness_hist")) for s in streams)
    counters = [by_index.get(i) or {} for i in range(len(expectations))]
    firsts = [c["first_submit_ns"] for c in counters if c.get("first_submit_ns") is not None]
    lasts = [c["last_submit_ns"] for c in counters if c.get("last_submit_ns") is not None]
    issued = sum(s["issued"] for s in streams)
    span = (max(lasts) - min(firsts)) if firsts else None
    skipped = sum(s["skipped"] or 0 for s in streams) if complete else None
    trace_rate = sum(e.trace_iops for e in expectations)
    achieved = _rate(issued, span)
    due_firsts = [c["first_due_ns"] for c in counters if c.get("first_due_ns") is not None]
    due_lasts = [c["last_due_ns"] for c in counters if c.get("last_due_ns") is not None]
    intended = _rate(issued, (max(due_lasts) - min(due_firsts)) if due_firsts else None)
    wanted = intended if settings.get("mode") == "timed" else trace_rate
    total = {
        "records": sum(e.records for e in expectations),
        "expected": (
            None
            if any(e.expected is None for e in expectations)
            else sum(e.expected or 0 for e in expectations)
        ),
        "issued": issued,
        "skipped": skipped,
        "trace_iops": trace_rate,
        "intended_iops": intended,
        "achieved_iops": achieved,
        "rate_error_pct": _pct(achieved, wanted),
        "lateness": _lateness(merged),
        "lateness_hist": merged.to_json() if merged.n else None,
    }
    section = {**settings, "streams": streams, "total": total, "skipped": skipped}
    section["verdict"] = verdict(section)
    return section


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} us" if value >= 10 else f"{value:.1f} us"


def verdict(section: dict[str, Any]) -> str:
    """One sentence: what was replayed, how fast against the trace, how late, what was lost."""
    total = section["total"]
    mode = section["mode"]
    text = f"replayed {total['issued']:,} IOs ({mode}"
    text += f", speed {section['speed']:g}" if section.get("speed", 1.0) != 1.0 else ""
    text += ")"
    achieved, wanted = total["achieved_iops"], total["trace_iops"]
    if achieved is not None:
        text += f" at {achieved:,.1f} IOPS"
        intended = total.get("intended_iops")
        if intended and mode == "timed":
            text += f" against the trace's {intended:,.1f} ({total['rate_error_pct']:+.2f}%)"
        elif wanted:
            text += f", {achieved / wanted:,.2f}x the trace's {wanted:,.1f}"
    late = total["lateness"]
    if late is not None:
        text += (
            f"; issue lateness p50 {_us(late['p50_us'])}, p99 {_us(late['p99_us'])}, "
            f"max {_us(late['max_us'])}"
        )
    skipped = total["skipped"]
    if skipped is None:
        if mode == "timed":
            text += "; the run did not finish, so skipped IOs are not counted"
        else:
            reached = sum(s["not_reached"] for s in section["streams"])
            text += f"; {reached:,} IOs not reached in --duration" if reached else ""
    elif skipped == 0:
        text += "; none skipped"
    else:
        text += f"; {skipped:,} skipped"
    return text


def failure(section: dict[str, Any] | None) -> str | None:
    """Why a replay fails its run (IOs it should have issued and did not), or None."""
    if not section or not section.get("skipped"):
        return None
    names = [f"{s['name']} {s['skipped']:,}" for s in section["streams"] if s.get("skipped")]
    return (
        f"the replay skipped {section['skipped']:,} of {section['total']['expected']:,} IOs "
        f"({', '.join(names)}): every IO of the trace must be issued"
    )


def lines(section: dict[str, Any]) -> list[str]:
    """What the terminal prints: per stream when there are several, then the verdict."""
    out = []
    streams = section["streams"]
    if len(streams) > 1:
        for s in streams:
            late = s["lateness"]
            rate = s["achieved_iops"]
            line = f"  {s['name']}: {s['issued']:,} IOs"
            if rate is not None:
                line += f" at {rate:,.1f} IOPS"
            if s["rate_error_pct"] is not None and section["mode"] == "timed":
                line += f" (trace {s['intended_iops']:,.1f}, {s['rate_error_pct']:+.2f}%)"
            if late:
                line += f", lateness p99 {_us(late['p99_us'])}"
            out.append(line)
    rounded = sum(s["rounded"] for s in streams)
    if rounded:
        out.append(
            f"  {rounded:,} IOs were not aligned to {section['align']} bytes and were widened "
            "to the aligned blocks that cover them"
        )
    return [f"replay: {section['verdict']}", *out]
