"""The agent: what a Dask worker runs for tilemark, one per host (a Dask actor).

The client calls it in this order: `hello` (versions, names), `clock` (offset round trips),
`inspect` (the safety checks of its targets, no IO), `lock` and `prepare` (hold and fill the
targets; held until `release`, so a study keeps them across its runs), then per run `start`
(the run recorded with the targets, then the engine, sleeping until the run's absolute
start), `poll` (interval snapshots and the host's telemetry since the last call), `stop`,
`result` and `journal` (with --verify, the journals the host kept, fetched in pieces to be
stored with the host's part of the run). Everything crossing the wire is
plain data or a TargetInfo; errors cross as the exceptions the local runner raises
(UsageError, RunError, EngineError), so the client reports them as a one-host run would.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import tilemark
from tilemark import engine, targets
from tilemark.run.summary import summarize
from tilemark.targets import data as targetdata
from tilemark.targets import sets as targetset
from tilemark.targets.spec import TargetSpec
from tilemark.telemetry import kmsg
from tilemark.telemetry import sampler as tm


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
        self.locks: dict[str, targets.TargetLock] = {}
        self.handle: engine.Handle | None = None
        self.telemetry: tm.Telemetry | None = None
        self.plan: engine.Plan | None = None
        self.journal_dir: Path | None = None
        self.error: str | None = None
        self.done = False

    def hello(self) -> dict[str, Any]:
        return identity()

    def clock(self) -> int:
        """CLOCK_REALTIME now, ns (one sample of an offset round trip)."""
        return time.time_ns()

    def inspect(self, specs: list[TargetSpec], options: dict[str, Any]) -> list[targets.TargetInfo]:
        """Inspect this host's targets (targetset.inspect_targets' safety checks; no IO)."""
        self.infos = targetset.inspect_targets(specs, **options)
        return self.infos

    def forget(self) -> None:
        """Drop inspected targets (the client inspects again after a refusal elsewhere)."""
        self.release()
        self.infos = []

    def lock(self, argv: list[str]) -> None:
        """Hold every inspected target for this session (UsageError if another run has one)."""
        for info in self.infos:
            key = targets.lock_key(info)
            if key not in self.locks:
                lock = targets.lock_target(info, argv)
                lock.__enter__()
                self.locks[key] = lock

    def prepare(self) -> list[targets.TargetInfo]:
        """Create and fill the targets so reads never hit holes; the updated infos."""
        for info in self.infos:
            targets.prepare_target(info)
        return self.infos

    def release(self) -> None:
        """Stop any engine, drop kept journals and let go of the targets."""
        if self.handle is not None and not self.done:
            self.handle.stop()
        self._drop_journals()
        for lock in reversed(self.locks.values()):
            lock.__exit__(None, None, None)
        self.locks = {}

    def start(self, plan: engine.Plan, keep_cache: bool = False) -> list[dict[str, Any] | None]:
        """Record the run with the targets (targetdata.begin_plan: with --verify, each
        target's epoch, its journal kept here until the client fetched it), then start the
        engine; it sleeps until the plan's start_at_ns. Each target's verification settings."""
        self.handle, self.error, self.done = None, None, False
        self._drop_journals()
        self.journal_dir = Path(tempfile.mkdtemp(prefix="tilemark-journals-"))
        targetdata.begin_plan(self.infos, plan, self.journal_dir)
        for t in plan["targets"]:
            if not t["direct"] and not keep_cache:
                try:
                    targets.drop_cached(t["path"], t["offset"], t["length"])
                except OSError:
                    pass  # buffered reads may start warm; the one-host runner notes the same
        self.plan = plan
        self.telemetry = tm.Telemetry(plan, [t["path"] for t in plan["targets"]])
        self.handle = engine.start(plan)
        # Telemetry samples from the engine's run time 0, which the absolute start puts ahead.
        start_at = plan.get("start_at_ns")
        delay = 0.0 if start_at is None else max(0.0, (start_at - time.time_ns()) / 1e9)
        threading.Timer(delay, self.telemetry.start).start()
        return [t.get("verify") for t in plan["targets"]]

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
        """The engine's result once it ended, with the host's telemetry summary and notes and
        the journals it kept (target index -> bytes)."""
        assert self.handle is not None
        out: dict[str, Any] = {"result": None, "error": None, "journals": {}}
        try:
            out["result"] = self.handle.result()
        except engine.EngineError as e:
            out["error"] = str(e)
        if self.telemetry is not None:
            if out["result"] is not None and self.plan is not None:
                own = summarize(self.plan, out["result"])
                out["telemetry"] = tm.summarize_telemetry(
                    own, self.telemetry.totals, self.telemetry.devices
                )
                kernel = kmsg.summary(self.telemetry.kernel_records)
                if kernel is not None:
                    out["telemetry"]["kernel"] = kernel
            out["telemetry_notes"] = list(self.telemetry.notes)
        for index, t in enumerate((self.plan or {}).get("targets") or []):
            journal = (t.get("verify") or {}).get("journal")
            if journal and os.path.exists(journal):
                out["journals"][index] = os.path.getsize(journal)
        return out

    def journal(self, index: int, offset: int, size: int) -> bytes:
        """`size` bytes from `offset` of the journal of target `index` of the last run."""
        journal = ((self.plan or {})["targets"][index].get("verify") or {})["journal"]
        with open(journal, "rb") as f:
            f.seek(offset)
            return f.read(size)

    def _drop_journals(self) -> None:
        if self.journal_dir is not None:
            shutil.rmtree(self.journal_dir, ignore_errors=True)
            self.journal_dir = None
