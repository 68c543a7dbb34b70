"""fio's steady-state rule per reporting group: `[[steadystate]]` rules with
`ends = "streams"` (workload/steadyrule.py), each ending only the streams it judges.

fio judges each reporting group on its own and, when a group's criterion holds, ends that
group's jobs (steadystate.c: fio_mark_td_terminate for the group); jobs after a `stonewall`
then start (backend.c run_threads starts them once no earlier job runs). Here each rule is a
FioSteadyMonitor whose samples begin `ramp` after its streams' actual start, which the engine
reports (streams that wait for others start when those end, a time not known in advance);
when its criterion is met the monitor asks the engine to stop those streams
(`Handle.stop_streams`), and streams waiting for them (`after`) start. A rule that ends the run
(`ends = "run"`) stops the run as before. run.json `summary.fio_steady_state` holds one record
per rule under `groups`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tilemark.run.fio_steady import FioSteadyMonitor
from tilemark.workload import plan

NEVER = float("inf")


@dataclass
class FioGroupsMonitor:
    """A RunMonitor (runner.py) for several fio steady-state rules."""

    monitors: list[FioSteadyMonitor]
    ramps: list[float]  # each rule's ramp, added to its streams' start once known
    stopped: set[int] = field(default_factory=set)  # rules whose streams were stopped
    handle: Any = None  # the running engine (attach), to read spans and stop streams
    warmup_s: float = 0.0

    def attach(self, handle: Any, compiled: dict[str, Any]) -> None:
        """The run's engine handle (runner.drive), if it can report spans and stop streams
        (a cluster's cannot: refused before the run)."""
        if hasattr(handle, "spans") and hasattr(handle, "stop_streams"):
            self.handle = handle
        self.warmup_s = (compiled.get("warmup_ms") or 0) / 1000

    @classmethod
    def for_workload(cls, workload: plan.Workload) -> FioGroupsMonitor:
        """The monitor of a workload's rules (stream rules first, then a run rule)."""
        rules = list(workload.stream_rules)
        if workload.steadystate is not None:
            rules.append(workload.steadystate)
        names = [s.name for s in workload.streams]
        monitors = []
        for rule in rules:
            judged = rule.judged(names)
            monitors.append(FioSteadyMonitor(rule, judged, NEVER))
        return cls(monitors, [r.ramp_s for r in rules])

    def see_spans(self, spans: list[dict[str, Any]], warmup_s: float = 0.0) -> None:
        """The streams' actual starts (engine spans): a rule samples from `ramp` after the
        first of its streams started (after the warm-up)."""
        for m, ramp in zip(self.monitors, self.ramps, strict=True):
            if m.begin_s != NEVER:
                continue
            starts = [
                spans[i]["started_ns"]
                for i in m.streams
                if i < len(spans) and spans[i].get("started_ns") is not None
            ]
            if starts:
                m.begin_s = max(min(starts) / 1e9, warmup_s) + ramp

    def add(self, snapshots: list[dict[str, Any]]) -> None:
        if self.handle is not None:
            self.see_spans(self.handle.spans(), self.warmup_s)
        for m in self.monitors:
            m.add(snapshots)
        if self.handle is not None:
            for streams in self.streams_to_stop():
                self.handle.stop_streams(streams)

    def messages(self) -> list[str]:
        return [line for m in self.monitors for line in m.messages()]

    def streams_to_stop(self) -> list[list[int]]:
        """Streams of rules met since the last call, to stop (rules that end streams)."""
        out = []
        for k, m in enumerate(self.monitors):
            if m.met_at_s is not None and k not in self.stopped and m.rule.ends == "streams":
                self.stopped.add(k)
                out.append(list(m.streams))
        return out

    def should_stop(self) -> str | None:
        for m in self.monitors:
            if m.rule.ends == "run" and m.met_at_s is not None:
                return "fio-steady"
        return None

    def analyze(self, compiled: dict[str, Any], result: dict[str, Any], summary: dict) -> None:
        """The rules' records beside the summary (summary.fio_steady_state.groups)."""
        records = [m.record() for m in self.monitors]
        for record, m in zip(records, self.monitors, strict=True):
            record["ends"] = m.rule.ends
            if record["begins_s"] == NEVER:
                record["begins_s"] = None
        summary["fio_steady_state"] = {"rule": "fio-groups", "groups": records}
        for record in records:
            if not record["met"]:
                summary.setdefault("notes", []).append(record["verdict"])
