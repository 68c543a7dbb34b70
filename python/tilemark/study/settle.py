"""Settling: wait until storage that just absorbed a fill answers reads steadily.

Right after tilemark fills a target, the storage underneath may still be busy with that fill
(a host's page cache writing back, an array destaging its write cache, an SSD's garbage
collection). The guest cannot see that work, but reads see it: on the development VM the first
step after a fresh fill failed QoS with 242 ms read p99s that were 0.2 ms once the host was
done. So before a study's first step, a light probe (4 KiB random reads, queue depth 1, over
the whole data area) runs in 1-s rounds until its mean latency is steady by the SNIA PTS rule
on the last five rounds (range <= 20% of their mean, least-squares drift over the window
<= 10% of it), or until the bound. The probe only reads; it is not a stored run, but the study
records its rounds and how long settling took.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console

from tilemark import engine, targets
from tilemark.analysis.steady import RULE, steady
from tilemark.hist import latency_hist
from tilemark.interrupts import SignalStopper
from tilemark.workload import compiler, plan

ROUND_S = 1.0
PROBE = "4 KiB random reads, QD1, over the data area"


@dataclass
class Settling:
    """What settling did, for study.json and the summary."""

    seconds: float = 0.0
    steady: bool = False
    rounds_ms: list[float] = field(default_factory=list)
    interrupted: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "probe": PROBE,
            "seconds": round(self.seconds, 2),
            "steady": self.steady,
            "rounds_mean_ms": [round(r, 4) for r in self.rounds_ms],
            "rule": RULE,
        }

    def describe(self) -> str:
        last = f", last round {self.rounds_ms[-1]:.3g} ms" if self.rounds_ms else ""
        if self.steady:
            return f"settled in {self.seconds:.0f} s (read latency steady{last})"
        return f"not steady after {self.seconds:.0f} s{last}; measuring anyway"


def probe_plan(infos: list[targets.TargetInfo], *, backend: str, max_s: float) -> dict[str, Any]:
    """The engine plan of the read probe (one stream over every target)."""
    bs = max(4096, *(i.dio_alignment if i.direct else 0 for i in infos))
    workload = plan.parse_workload(
        {
            "target": [{"name": i.name or f"t{k}", "path": i.path} for k, i in enumerate(infos)],
            "duration": max_s,
            "interval": ROUND_S,
            "backend": backend,
            "direct": all(i.direct for i in infos),
            "threads": 1,
            "stream": [{"name": "settle", "rw": "randread", "bs": bs, "qd": 1}],
        },
        source="settle",
    )
    return compiler.compile_plan(workload, infos)


def settle(
    infos: list[targets.TargetInfo], *, backend: str, max_s: float, console: Console
) -> Settling:
    """Probe until read latency is steady or `max_s` has passed; Ctrl-C ends it early."""
    compiled = probe_plan(infos, backend=backend, max_s=max_s)
    out = Settling()
    console.print(f"settling: {PROBE} until latency is steady (at most {max_s:g} s)", markup=False)
    started = time.monotonic()
    with SignalStopper() as stopper:
        handle = engine.start(compiled)
        stopper.attach(handle)
        while True:
            finished = handle.wait(0.2)
            for snap in handle.poll():
                h = latency_hist(snap["streams"][0]["read"])
                if h.n:
                    out.rounds_ms.append(h.sum / h.n / 1e6)
            if not out.steady and steady(out.rounds_ms):
                out.steady = True
                handle.stop()
            if finished:
                break
        handle.result()
        out.interrupted = stopper.exit_status
    out.seconds = time.monotonic() - started
    console.print(f"settling: {out.describe()}", markup=False)
    return out
