"""The client's handle on a run across hosts: what engine.Handle is for one host.

It starts every host's engine on the same absolute start time, pulls each host's snapshots and
telemetry as they are made (stored at once under the run's hosts/NAME/), and hands the runner
merged snapshots: interval k once every host still running has sent its k.

A host is lost when its agent cannot be reached, or when it stops sending snapshots for 2
intervals: the other hosts have sent 2 intervals it has not, and it has been silent for at
least LOST_FLOOR_S (short intervals on a busy machine can delay an answer that long).
Judging silence by the other hosts' intervals rather than by this client's clock keeps a busy
client (or a machine whose every CPU is taken) from declaring healthy hosts lost; only when no
host is heard from at all, or once the run is stopping (every host then closes its interval
early, so interval numbers no longer measure time), does the client's clock decide, after
SILENT_FLOOR_S. The others are then stopped, everything received is kept, and the run ends
incomplete naming the lost host. A host whose engine ends early (its storage failed, an IO
hung) stops the others too.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark import engine
from tilemark.cluster import merge
from tilemark.cluster.placement import Host
from tilemark.errors import RunError, UsageError
from tilemark.store.intervals import IntervalLog, seal, seal_log, snapshot_rows
from tilemark.targets import data as targetdata
from tilemark.telemetry import sampler as tm

LOST_AFTER_INTERVALS = 2
LOST_FLOOR_S = 1.0  # the least silence that loses a host the others have left behind
SILENT_FLOOR_S = 10.0  # when every host is silent: the least silence before giving up on one
PULL_EVERY_S = 0.05  # how often wait() asks hosts for news while it waits
CALL_TIMEOUT_S = 10.0  # for a call already answered: only decoding remains
JOURNAL_CHUNK = 16 << 20  # journals are fetched from hosts in pieces of this size


def host_dir_name(name: str) -> str:
    """A host's directory under hosts/: its name with anything unsafe replaced."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", name) or "host"


@dataclass
class HostRun:
    """One host's part of a run, as the client follows it."""

    host: Host
    agent: Any
    plan: dict[str, Any]
    streams: list[int]  # global index of each of its streams
    store_dir: Path
    last_heard_s: float = 0.0  # client monotonic time of its latest new snapshot
    intervals: int = 0  # snapshots received
    last_interval: int = -1  # the latest interval received
    done: bool = False
    lost: str | None = None  # why it was declared lost
    lost_at_ns: int | None = None  # wall clock
    result: dict[str, Any] | None = None
    error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # telemetry, notes, journal sizes
    journals: list[str] = field(default_factory=list)  # stored, relative to the run directory
    pending: Any = None  # the poll call in flight
    totals: merge.Totals = field(default_factory=merge.Totals)
    logs: dict[str, IntervalLog] = field(default_factory=dict)

    def active(self) -> bool:
        return not self.done and self.lost is None


class ClusterHandle:
    """Runs host plans together; merged snapshots out (module doc)."""

    def __init__(
        self,
        runs: list[HostRun],
        merged_plan: dict[str, Any],
        *,
        run_id: str,
        start_at_ns: int,
        keep_cache: bool,
    ):
        self.runs = runs
        self.plan = merged_plan
        self.run_id = run_id
        self.start_at_ns = start_at_ns
        self.keep_cache = keep_cache
        self.interval_s = merged_plan["interval_ms"] / 1000
        self._by_interval: dict[int, dict[int, dict[str, Any]]] = {}
        self._next = 0
        self._ready: list[dict[str, Any]] = []
        self._stopped = False
        self.notes: list[str] = []

    # starting

    def start(self) -> None:
        """Open each host's stores and start its engine; any failure stops the others."""
        try:
            for r in self.runs:
                r.store_dir.mkdir(parents=True, exist_ok=True)
                r.logs["intervals"] = IntervalLog(r.store_dir / "intervals.arrows")
                r.logs["devices"] = IntervalLog(r.store_dir / tm.DEVICES_LOG, tm.DEVICE_SCHEMA)
                r.logs["host"] = IntervalLog(r.store_dir / tm.HOST_LOG, tm.HOST_SCHEMA)
            calls = [(r, r.agent.start(r.plan, self.keep_cache)) for r in self.runs]
            for r, call in calls:
                try:
                    verify = call.result(timeout=60)
                except (engine.EngineError, UsageError, RunError) as e:
                    raise type(e)(f"host {r.host.name}: {e}") from None
                for target, spec in zip(r.plan["targets"], verify, strict=True):
                    if spec is not None:
                        target["verify"] = spec  # the host's epoch and journal
        except BaseException:
            for r in self.runs:  # an engine started elsewhere must not run on alone
                with contextlib.suppress(Exception):
                    r.agent.stop()
            raise
        # Nothing is due before the first interval after the start has ended.
        first_due = time.monotonic() + (self.start_at_ns - time.time_ns()) / 1e9 + self.interval_s
        for r in self.runs:
            r.last_heard_s = first_due

    # what engine.Handle offers

    def poll(self) -> list[dict[str, Any]]:
        self._pull()
        out, self._ready = self._ready, []
        return out

    def wait(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            self._pull()
            if self.finished():
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(PULL_EVERY_S, left))

    def done(self) -> bool:
        return self.finished()

    def finished(self) -> bool:
        return all(not r.active() for r in self.runs)

    def stop(self) -> None:
        self._stopped = True
        for r in self.runs:
            if r.active():
                try:
                    r.agent.stop()
                except Exception:
                    pass  # a host that cannot be told is found lost by the next pull

    def result(self) -> dict[str, Any]:
        """The merged result; EngineError naming the host whose engine failed."""
        results = []
        for r in self.runs:
            if r.lost is None and r.result is None and r.error is None:
                self._collect(r)
            if r.error is not None:
                raise engine.EngineError(f"host {r.host.name}: {r.error}")
            if r.result is None:
                r.result = r.totals.result(int(self.start_at_ns))
            results.append(r.result)
        return merge.merge_results(results)

    def live_line(self) -> str | None:
        parts = []
        for r in self.runs:
            state = "lost" if r.lost else ("done" if r.done else "")
            figure = r.extra.get("live")
            parts.append(f"{r.host.name} {figure or '-'}{' ' + state if state else ''}")
        return " | ".join(parts)

    # internals

    def _pull(self) -> None:
        now = time.monotonic()
        for r in self.runs:
            if not r.active():
                continue
            if r.pending is None:
                try:
                    r.pending = r.agent.poll()
                except Exception as e:
                    self._lose(r, f"its agent could not be reached ({type(e).__name__})")
                    continue
            if r.pending.done():
                call, r.pending = r.pending, None
                try:
                    news = call.result(timeout=CALL_TIMEOUT_S)
                except Exception as e:
                    self._lose(r, f"its agent could not be reached ({type(e).__name__}: {e})")
                    continue
                self._take(r, news, now)
        self._judge_silence(now)
        self._merge_ready()

    def _judge_silence(self, now: float) -> None:
        """Lose hosts the others have left 2 intervals behind, or, when nobody is heard from,
        hosts silent for 2 intervals and at least SILENT_FLOOR_S (module doc)."""
        ahead = max(r.last_interval for r in self.runs)
        for r in self.runs:
            if not r.active():
                continue
            behind = ahead - r.last_interval
            silent = now - r.last_heard_s
            if behind >= LOST_AFTER_INTERVALS and silent >= LOST_FLOOR_S and not self._stopped:
                self._lose(
                    r,
                    f"no snapshot for {behind} intervals ({silent:.1f} s) while the other "
                    "hosts sent theirs",
                )
            elif silent > max(LOST_AFTER_INTERVALS * self.interval_s, SILENT_FLOOR_S):
                self._lose(r, f"no snapshot for {silent:.1f} s")

    def _take(self, r: HostRun, news: dict[str, Any], now: float) -> None:
        snaps = news["snapshots"]
        for snap in snaps:
            snap["streams"] = merge.globalize(snap["streams"], r.streams)
            r.totals.add(snap)
            self._by_interval.setdefault(int(snap["interval"]), {})[id(r)] = snap
            r.logs["intervals"].add(
                snapshot_rows(self.run_id, self.plan, snap),
                int(snap["start_ns"]),
                int(snap["end_ns"]),
            )
        if snaps:
            r.intervals += len(snaps)
            r.last_interval = max(r.last_interval, max(int(s["interval"]) for s in snaps))
            r.last_heard_s = now
            last = snaps[-1]
            seconds = (int(last["end_ns"]) - int(last["start_ns"])) / 1e9
            ops = sum(
                int((s.get(k) or {}).get("ops", 0))
                for s in last["streams"]
                for k in ("read", "write")
            )
            r.extra["live"] = f"{ops / seconds:,.0f} IOPS" if seconds > 0 else None
        if news["host"]:
            start = min(int(h["start_ns"]) for h in news["host"])
            end = max(int(h["end_ns"]) for h in news["host"])
            for row in news["devices"] + news["host"]:
                row["run_id"] = self.run_id
            r.logs["devices"].add(news["devices"], start, end)
            r.logs["host"].add(news["host"], start, end)
        for name in ("devices", "host"):
            r.logs[name].follow(r.logs["intervals"])  # a killed run keeps them in step
        if news["done"]:
            r.done = True
            self._collect(r)
            if not self._stopped and (r.error or (r.result or {}).get("stop_reason")):
                self.stop()  # this host's run ended early: the others' would be a different run

    def _collect(self, r: HostRun) -> None:
        try:
            out = r.agent.result().result(timeout=60)
        except Exception as e:
            self._lose(r, f"its result could not be fetched ({type(e).__name__})")
            return
        r.error = out.get("error")
        if out.get("result") is not None:
            res = out["result"]
            res["streams"] = merge.globalize(res.get("streams") or [], r.streams)
            for h in res.get("hung") or []:
                h["stream"] = r.streams[int(h["stream"])]
            for f in (res.get("verification") or {}).get("findings") or []:
                if f.get("stream") is not None:
                    f["stream"] = r.streams[int(f["stream"])]
                f["host"] = r.host.name
            r.result = res
        r.extra["telemetry"] = out.get("telemetry")
        r.extra["telemetry_notes"] = out.get("telemetry_notes") or []
        r.extra["journals"] = out.get("journals") or {}

    def _lose(self, r: HostRun, why: str) -> None:
        r.lost = why
        r.lost_at_ns = time.time_ns()
        if r.pending is not None:
            r.pending = None
        self.notes.append(f"host {r.host.name} lost: {why}; the run stopped on every host")
        self.stop()

    def _merge_ready(self) -> None:
        while True:
            have = self._by_interval.get(self._next, {})
            waiting = [r for r in self.runs if id(r) not in have and r.active()]
            if waiting or not have:
                if not waiting and not have and self.finished():
                    # A gap no host will fill (every host ended before it): skip past it.
                    later = [k for k in self._by_interval if k > self._next]
                    if later:
                        self._next = min(later)
                        continue
                return
            snaps = [have[id(r)] for r in self.runs if id(r) in have]
            self._ready.append(merge.merge_snapshots(snaps))
            del self._by_interval[self._next]
            self._next += 1

    # storing

    def fetch_journals(self) -> list[str]:
        """Copy every verification journal a host kept (--verify) under its directory, where
        its plan then names it; problems as notes. Runs once the run ended, so copying does
        not delay anyone's snapshots."""
        problems = []
        for r in self.runs:
            for index, size in sorted((r.extra.get("journals") or {}).items()):
                name = targetdata.journal_name(int(index))
                path = r.store_dir / name
                try:
                    _copy_journal(r.agent, int(index), int(size), path)
                except Exception as e:
                    problems.append(
                        f"host {r.host.name}: its journal of target {index} could not be "
                        f"fetched ({type(e).__name__}: {e}); `tilemark verify` of this run "
                        "cannot judge that target by it"
                    )
                    continue
                r.plan["targets"][int(index)]["verify"]["journal"] = str(path.resolve())
                r.journals.append(f"{r.store_dir.parent.name}/{r.store_dir.name}/{name}")
        return problems

    def seal(self) -> list[str]:
        """Close and seal every host's interval and telemetry logs; problems as notes."""
        problems = []
        for r in self.runs:
            for log in r.logs.values():
                try:
                    log.close()
                except OSError as e:
                    problems.append(f"host {r.host.name}: writing {log.path}: {e}")
            try:
                seal(r.store_dir)
                seal_log(
                    r.store_dir / tm.DEVICES_LOG, r.store_dir / tm.DEVICES_FILE, tm.DEVICE_SCHEMA
                )
                seal_log(r.store_dir / tm.HOST_LOG, r.store_dir / tm.HOST_FILE, tm.HOST_SCHEMA)
            except OSError as e:
                problems.append(f"host {r.host.name}: sealing {r.store_dir}: {e}")
        return problems


def _copy_journal(agent: Any, index: int, size: int, path: Path) -> None:
    """A host's journal of target `index` into `path`, in pieces; pieces of zeros (blocks
    never written) are left as holes, so the copy is as sparse as the journal."""
    with open(path, "wb") as f:
        for offset in range(0, size, JOURNAL_CHUNK):
            piece = agent.journal(index, offset, min(JOURNAL_CHUNK, size - offset)).result(
                timeout=60
            )
            if piece.count(0) == len(piece):
                f.seek(offset + len(piece))
            else:
                f.seek(offset)
                f.write(piece)
        f.truncate(size)


class HostsLine:
    """Stands for runner.drive's telemetry: the live view's line of per-host figures. Each
    host's telemetry itself is stored under its own directory as it arrives."""

    latest = None

    def __init__(self, handle: ClusterHandle):
        self.handle = handle

    def rows(self, snapshots: list[dict[str, Any]], *, final: bool = False) -> tuple[list, list]:
        return [], []

    def live_line(self) -> str | None:
        return self.handle.live_line()

    def stop(self) -> None:
        pass
