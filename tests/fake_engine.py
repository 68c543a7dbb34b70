"""A stand-in for the Rust engine: plans in, synthetic snapshots out, no IO.

`fake_engine` replaces `tilemark.engine.start`; tests set the handle's options through the
returned dict and inspect the handles (and the plans they got) afterwards.
"""

from __future__ import annotations

import pytest

from engine_data import op
from tilemark import engine
from tilemark.hist import Histogram


class FakeHandle:
    """Stands in for engine.Handle: one snapshot per wait(), stop() ends the run early.

    `latencies(stream, interval, plan)` gives the read latencies (ns) of a stream in an interval
    (default: 100 reads of 200 us). With `intervals=None` the run lasts as the plan says
    (warm-up intervals first); a number gives that many measured intervals.
    """

    def __init__(self, plan, *, intervals=3, on_wait=None, fail=None, latencies=None):
        self.plan = plan
        step_ms = plan.get("interval_ms") or 1000
        self.warmup = 0
        if intervals is None:
            self.warmup = -(-(plan.get("warmup_ms") or 0) // step_ms)
            intervals = self.warmup + -(-plan["duration_ms"] // step_ms)
        self.intervals = intervals
        self.step_ns = step_ms * 1_000_000
        self.on_wait = on_wait
        self.fail = fail
        self.latencies = latencies or (lambda stream, interval, plan: [200_000] * 100)
        self.sent = 0
        self.waits = 0
        self.stopped = False
        self.pending = []
        self.measured: list[dict] = []

    def _counters(self, index, interval):
        return {
            "stream": index,
            "read": op(self.latencies(index, interval, self.plan), 4096),
            "write": op([], 4096),
            "sync": op([], 0),
            "lag_max_ns": 0,
            "behind_ios": 0,
            "inflight": 0,
        }

    def wait(self, timeout_s):
        self.waits += 1
        if self.on_wait is not None:
            self.on_wait(self.waits)
        if not self.done():
            start = self.sent * self.step_ns
            streams = [self._counters(i, self.sent) for i in range(len(self.plan["streams"]))]
            snap = {
                "interval": self.sent,
                "phase": "warmup" if self.sent < self.warmup else "measure",
                "start_ns": start,
                "end_ns": start + self.step_ns,
                "streams": streams,
            }
            self.pending.append(snap)
            if snap["phase"] == "measure":
                self.measured.append(snap)
            self.sent += 1
        return self.done()

    def done(self):
        return self.stopped or self.sent >= self.intervals

    def poll(self):
        out, self.pending = self.pending, []
        return out

    def stop(self):
        self.stopped = True

    def result(self):
        if self.fail:
            raise engine.EngineError(self.fail)
        streams = []
        for i in range(len(self.plan["streams"])):
            rows = [snap["streams"][i] for snap in self.measured]
            streams.append(
                {
                    "stream": i,
                    **{
                        kind: merge_ops([r[kind] for r in rows])
                        for kind in ("read", "write", "sync")
                    },
                    "lag_max_ns": 0,
                    "ios_issued_late": 0,
                }
            )
        first = self.measured[0]["start_ns"] if self.measured else 0
        return {
            "complete": not self.stopped,
            "started_at_ns": 1_790_000_000_000_000_000,
            "measure_start_ns": first,
            "measure_end_ns": self.sent * self.step_ns,
            "streams": streams,
        }


def merge_ops(ops: list[dict]) -> dict:
    """One op kind's counters summed over intervals (histograms merged)."""
    out = {"ops": 0, "bytes": 0, "errors": {}}
    for o in ops:
        out["ops"] += o["ops"]
        out["bytes"] += o["bytes"]
    for kind in ("service", "response"):
        hists = [o.get(kind) for o in ops]
        out[kind] = None if all(h is None for h in hists) else Histogram.merged(hists).to_json()
    return out


@pytest.fixture
def fake_engine(monkeypatch):
    """Replace engine.start; the test sets handle options through the returned dict."""
    options: dict = {}
    started: list[FakeHandle] = []

    def start(plan):
        handle = FakeHandle(plan, **options)
        started.append(handle)
        return handle

    monkeypatch.setattr(engine, "start", start)
    return options, started
