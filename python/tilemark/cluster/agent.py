"""The agent: what a Dask worker runs for tilemark, one per host (a Dask actor).

The client calls it in this order: `hello` (versions, names), `clock` (offset round trips),
`inspect` (the safety checks of its targets, no IO), `lock` and `prepare` (hold and fill the
targets; held until `release`, so a study keeps them across its runs), then per run `start`
(the engine, sleeping until the run's absolute start), `poll` (interval snapshots and the
host's telemetry since the last call), `stop` and `result`. Everything crossing the wire is
plain data or a TargetInfo; errors cross as the exceptions the local runner raises
(UsageError, RunError, EngineError), so the client reports them as a one-host run would.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any

import tilemark
from tilemark import engine, targets
from tilemark import telemetry as tm


def identity() -> dict[str, Any]:
    """Who this process is and which formats it reads (the client refuses a mismatch)."""
    try:
        from distributed import get_worker

        worker = get_worker()
        name, address = str(worker.name), str(worker.address)
    except (ImportError, ValueError):
        name, address = str(os.getpid()), ""
    return {
        "hostname": socket.gethostname(),
        "worker": name,
        "address": address,
        "pid": os.getpid(),
        "tilemark_version": tilemark.__version__,
        "engine_version": engine.version(),
        "plan_version": engine.PLAN_VERSION,
    }


class HostAgent:
    """One host's side of a cluster run (module doc). Dask runs its methods one at a time on
    the worker's actor thread."""

    def __init__(self) -> None:
        self.infos: list[targets.TargetInfo] = []
        self.locks: list[targets.TargetLock] = []
        self.handle: engine.Handle | None = None
        self.telemetry: tm.Telemetry | None = None
        self.error: str | None = None
        self.done = False

    def hello(self) -> dict[str, Any]:
        return identity()

    def clock(self) -> int:
        """CLOCK_REALTIME now, ns (one sample of an offset round trip)."""
        return time.time_ns()

    def inspect(self, path: str, options: dict[str, Any]) -> targets.TargetInfo:
        """Inspect a target on this host (targets.inspect_target's safety checks; no IO)."""
        info = targets.inspect_target(path, **options)
        self.infos.append(info)
        return info

    def forget(self) -> None:
        """Drop inspected targets (the client inspects again after a refusal elsewhere)."""
        self.release()
        self.infos = []

    def lock(self, argv: list[str]) -> None:
        """Hold every inspected target for this session (UsageError if another run has one)."""
        for info in self.infos[len(self.locks) :]:
            lock = targets.lock_target(info, argv)
            lock.__enter__()
            self.locks.append(lock)

    def prepare(self) -> list[targets.TargetInfo]:
        """Create and fill the targets so reads never hit holes; the updated infos."""
        for info in self.infos:
            targets.prepare_target(info)
        return self.infos

    def release(self) -> None:
        """Stop any engine and let go of the targets."""
        if self.handle is not None and not self.done:
            self.handle.stop()
        for lock in reversed(self.locks):
            lock.__exit__(None, None, None)
        self.locks = []

    def start(self, plan: engine.Plan, keep_cache: bool = False) -> None:
        """Start the engine on this host's plan; it sleeps until the plan's start_at_ns."""
        self.handle, self.error, self.done = None, None, False
        for t in plan["targets"]:
            if not t["direct"] and not keep_cache:
                try:
                    targets.drop_cached(t["path"], t["offset"], t["length"])
                except OSError:
                    pass  # buffered reads may start warm; the one-host runner notes the same
        self.telemetry = tm.Telemetry(plan, [t["path"] for t in plan["targets"]])
        self.handle = engine.start(plan)
        # Telemetry samples from the engine's run time 0, which the absolute start puts ahead.
        start_at = plan.get("start_at_ns")
        delay = 0.0 if start_at is None else max(0.0, (start_at - time.time_ns()) / 1e9)
        threading.Timer(delay, self.telemetry.start).start()

    def telemetry_record(self) -> dict[str, Any] | None:
        return None if self.telemetry is None else self.telemetry.record()

    def poll(self) -> dict[str, Any]:
        """Snapshots and telemetry rows since the last poll; `done` once the engine ended."""
        if self.handle is None:
            return {"snapshots": [], "devices": [], "host": [], "done": True}
        done = self.handle.done()
        snaps = self.handle.poll()
        if done:
            snaps += self.handle.poll()
        devices: list[dict[str, Any]] = []
        host: list[dict[str, Any]] = []
        if self.telemetry is not None:
            if done:
                self.telemetry.stop()
            devices, host = self.telemetry.rows(snaps, final=done)
        self.done = done
        return {"snapshots": snaps, "devices": devices, "host": host, "done": done}

    def stop(self) -> None:
        if self.handle is not None:
            self.handle.stop()

    def result(self) -> dict[str, Any]:
        """The engine's result once it ended, with the host's telemetry totals and notes."""
        assert self.handle is not None
        out: dict[str, Any] = {"result": None, "error": None}
        try:
            out["result"] = self.handle.result()
        except engine.EngineError as e:
            out["error"] = str(e)
        if self.telemetry is not None:
            out["telemetry_totals"] = {
                "devices": self.telemetry.totals.devices(),
                "host": self.telemetry.totals.host(),
            }
            out["telemetry_notes"] = list(self.telemetry.notes)
        return out
