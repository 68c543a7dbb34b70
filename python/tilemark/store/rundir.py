"""Writing run directories: run.json (provenance, plan, summary, result) and the interval rows.

Layout and columns are documented in docs/results-schema.md; that document and
SCHEMA_VERSION change together. A run directory is the source of truth; the catalog is an
index over run directories that can always be rebuilt from them. Reading them is rundoc.py.
"""

from __future__ import annotations

import errno
import os
import secrets
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tilemark
from tilemark.run import pertarget
from tilemark.store import catalog, process
from tilemark.store.intervals import IntervalLog, seal, seal_log, snapshot_rows
from tilemark.store.layout import INTERVAL_LOG, INTERVALS_FILE, SCHEMA_VERSION, describe_os_error
from tilemark.store.rundoc import (  # the reading side; re-exported for the writer's callers
    RUN_JSON,
    StoreError,
    iso_utc,
    utc_now_iso,
    write_json_atomic,
)
from tilemark.telemetry import envinfo
from tilemark.telemetry import sampler as tm

# Space set aside when a run starts and released when it ends, so that a results filesystem
# that fills during the run still has room for the final run.json.
RESERVE_FILE = ".reserve"
RESERVE_BASE = 256 << 10
RESERVE_PER_STREAM = 32 << 10
RESERVE_MAX = 64 << 20


def _engine_version() -> str | None:
    try:
        from tilemark import engine  # the compiled module may not be built: import lazily

        return engine.version()
    except Exception:
        return None


def _new_run_dir(results_root: Path) -> tuple[str, Path, datetime]:
    results_root.mkdir(parents=True, exist_ok=True)
    while True:
        now = datetime.now(UTC)
        run_id = f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
        path = results_root / run_id
        try:
            path.mkdir()
        except FileExistsError:
            continue  # two runs started in the same second drew the same suffix
        return run_id, path, now


def allocate_dir(root: Path) -> tuple[str, Path, str]:
    """A new, empty directory under `root` named by a fresh id (UTC start time + random
    suffix, as runs are): (id, path, start time as ISO UTC)."""
    new_id, path, started = _new_run_dir(Path(root))
    return new_id, path, iso_utc(started)


def _reserve(path: Path, size: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.posix_fallocate(fd, 0, size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
            raise
        # A filesystem that cannot allocate ahead: run without a reserve.
    finally:
        os.close(fd)


class RunWriter:
    """Writes one run directory as the run progresses; finish() seals it and catalogs it.

    A failed write of results (a full disk) never raises out of add_snapshots or finish: the
    writer keeps what it wrote, stops storing, and records why in `failure`; the caller stops
    the run, and finish() marks it failed.
    """

    def __init__(
        self,
        results_root: Path,
        *,
        plan: dict,
        workload: dict,
        targets: list[dict],
        argv: list[str],
        kind: str = "run",
        telemetry: dict[str, Any] | None = None,
        label: str | None = None,
    ):
        self.results_root = Path(results_root)
        self.run_id, self.path, started = _new_run_dir(self.results_root)
        self.plan = plan
        self.catalog_error: str | None = None
        self.failure: str | None = None
        self._lost_from: int | None = None
        self._finished = False
        target_paths = [str(t.get("path")) if isinstance(t, dict) else str(t) for t in targets]
        self.doc: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "tilemark_version": tilemark.__version__,
            "engine_version": _engine_version(),
            "run_id": self.run_id,
            "kind": kind,
            "label": label,
            "status": "running",
            "complete": False,
            "error": None,
            "argv": list(argv),
            "started_at": iso_utc(started),
            "ended_at": None,
            "process": process.current(),
            "workload": workload,
            "plan": plan,
            "targets": targets,
            "environment": envinfo.collect(target_paths),
            "summary": None,
            "result": None,
            "hosts": None,  # a cluster run's hosts (cluster/hosts.py); None on one host
            "files": {"intervals": INTERVALS_FILE, "intervals_log": INTERVAL_LOG},
            "verify_passes": [],
        }
        self._telemetry_logs: dict[str, IntervalLog] = {}
        # Per-target intervals, for runs with several targets (one target: its totals).
        self._per_target = len(plan.get("targets") or []) > 1
        if self._per_target:
            self.doc["files"]["targets"] = pertarget.TARGETS_FILE
        if telemetry is not None:
            self.doc["telemetry"] = telemetry
            self.doc["files"].update(
                {"devices": tm.DEVICES_FILE, "host": tm.HOST_FILE},
            )
        streams = len(plan.get("streams") or [])
        reserve = min(RESERVE_MAX, RESERVE_BASE + RESERVE_PER_STREAM * streams)
        try:
            # Written now, so even a run killed before its first interval leaves a trace.
            write_json_atomic(self.path / RUN_JSON, self.doc)
            self._log = IntervalLog(self.path / INTERVAL_LOG)
            if telemetry is not None:
                self._telemetry_logs = {
                    "devices": IntervalLog(self.path / tm.DEVICES_LOG, tm.DEVICE_SCHEMA),
                    "host": IntervalLog(self.path / tm.HOST_LOG, tm.HOST_SCHEMA),
                }
            if self._per_target:
                self._telemetry_logs["targets"] = IntervalLog(
                    self.path / pertarget.TARGETS_LOG, pertarget.TARGET_SCHEMA
                )
            _reserve(self.path / RESERVE_FILE, reserve)
        except OSError:
            # Nothing was measured yet: leave no half-made run behind.
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def rewrite(self) -> None:
        """Write run.json again while running (the plan gained what the run's start decided)."""
        write_json_atomic(self.path / RUN_JSON, self.doc)

    @property
    def rows_written(self) -> int:
        """Interval rows written to disk so far."""
        return self._log.rows_written

    def add_snapshots(self, snaps: list[dict]) -> None:
        """Append interval snapshots to the log (each one on disk within about a second)."""
        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished; no more intervals")
        for snap in snaps:
            if self.failure is not None:
                return
            rows = snapshot_rows(self.run_id, self.plan, snap)
            span = int(snap["start_ns"]), int(snap["end_ns"])
            try:
                self._log.add(rows, *span)
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc, first_lost=int(snap["interval"]))
                continue
            log = self._telemetry_logs.get("targets")
            if log is not None:
                try:
                    log.add(pertarget.target_rows(self.run_id, self.plan, snap), *span)
                except OSError as exc:
                    self._fail(f"writing {log.path}", exc, first_lost=int(snap["interval"]))
        self._follow_intervals()

    def add_frames(self, frames: list[Any], per_target: list[dict] | None = None) -> None:
        """Append interval frames (engine.Frame: rows the engine built) to the log; a run with
        several targets also gives each frame's per-target snapshot (runner.target_snapshot)
        for the per-target log."""
        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished; no more intervals")
        for k, frame in enumerate(frames):
            if self.failure is not None:
                return
            batch = frame.record_batch(self.run_id, self._log.schema)
            try:
                self._log.add_batch(batch, frame.start_ns, frame.end_ns)
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc, first_lost=frame.interval)
                continue
            log = self._telemetry_logs.get("targets")
            if log is not None and per_target is not None:
                try:
                    rows = pertarget.target_rows(self.run_id, self.plan, per_target[k])
                    log.add(rows, frame.start_ns, frame.end_ns)
                except OSError as exc:
                    self._fail(f"writing {log.path}", exc, first_lost=frame.interval)
        self._follow_intervals()

    def add_telemetry(self, device_rows: list[dict], host_rows: list[dict]) -> None:
        """Append telemetry rows (telemetry.Telemetry.rows) to their logs."""
        if self._finished or self.failure is not None or not host_rows:
            return
        start = min(int(r["start_ns"]) for r in host_rows)
        end = max(int(r["end_ns"]) for r in host_rows)
        for name, rows in (("devices", device_rows), ("host", host_rows)):
            log = self._telemetry_logs.get(name)
            if log is None:
                continue
            try:
                log.add(rows, start, end)
            except OSError as exc:
                self._fail(f"writing {log.path}", exc)
                return
        self._follow_intervals()

    def _follow_intervals(self) -> None:
        """Telemetry rows of intervals on disk go to disk too (IntervalLog.follow)."""
        for name in ("devices", "host"):
            log = self._telemetry_logs.get(name)
            if log is None or self.failure is not None:
                continue
            try:
                log.follow(self._log)
            except OSError as exc:
                self._fail(f"writing {log.path}", exc)

    def flush(self) -> None:
        """Write buffered intervals now (the log otherwise groups short ones into ~1 s)."""
        if self.failure is None:
            try:
                self._log.flush()
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc)

    def _fail(self, action: str, exc: OSError, first_lost: int | None = None) -> None:
        if self.failure is not None:
            return
        self._log.discard_buffer()
        self.failure = f"results could not be written: {describe_os_error(exc)} {action}"
        if first_lost is not None:
            self.failure += f"; intervals from {first_lost} on are not stored"

    def finish(
        self,
        result: dict | None,
        *,
        summary: dict | None,
        complete: bool,
        error: str | None = None,
        storage_failure: str | None = None,
    ) -> Path:
        """Seal the intervals, write the final run.json, register in the catalog; the run dir.

        `storage_failure` is "errors" (IOs failed), "hung" (an IO never completed) or
        "data-errors" (verification found data the storage should not hold): the
        storage under test failed the run, which is stored with that status and `error`.
        A results filesystem that fills up leaves the run failed with the reason, the
        intervals that fit readable (sealed, or in the log), and no temporary file.
        """
        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished")
        self._finished = True
        if self.failure is None:
            try:
                self._log.close()
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc)
        self._log.discard_buffer()
        for log in self._telemetry_logs.values():
            if self.failure is None:
                try:
                    log.close()
                except OSError as exc:
                    self._fail(f"writing {log.path}", exc)
            log.discard_buffer()
            log.abandon()
        try:
            seal(self.path)
            if self.failure is None:
                seal_log(self.path / tm.DEVICES_LOG, self.path / tm.DEVICES_FILE, tm.DEVICE_SCHEMA)
                seal_log(self.path / tm.HOST_LOG, self.path / tm.HOST_FILE, tm.HOST_SCHEMA)
                if self._per_target:
                    seal_log(
                        self.path / pertarget.TARGETS_LOG,
                        self.path / pertarget.TARGETS_FILE,
                        pertarget.TARGET_SCHEMA,
                    )
        except OSError as exc:
            if self.failure is None:
                self.failure = (
                    f"results could not be written: {describe_os_error(exc)} writing "
                    f"{self.path / INTERVALS_FILE}; the intervals are kept in {INTERVAL_LOG}"
                )
        if self.failure is not None:
            error = self.failure if error is None else f"{error}; {self.failure}"
        if self.failure is not None or (error is not None and storage_failure is None):
            status = "failed"
        elif storage_failure is not None:
            status = storage_failure
        else:
            status = "complete" if complete else "incomplete"
        self.doc.update(
            status=status,
            complete=bool(complete) and status == "complete",
            error=error,
            ended_at=utc_now_iso(),
            summary=summary,
            result=result,
        )
        self._write_final_doc()
        (self.path / RESERVE_FILE).unlink(missing_ok=True)
        if self.failure is not None:
            # The results filesystem failed: the next `tilemark runs` catalogs the run.
            return self.path
        try:
            catalog.register(self.results_root, self.path, self.doc)
        except catalog.CatalogError as exc:
            # The run is safely on disk; the next `tilemark runs` adds it to the catalog.
            self.catalog_error = str(exc)
        return self.path

    def _write_final_doc(self) -> None:
        """The final run.json, however full the disk: with the space reserved at the start,
        then without indentation, then without the engine result (the bulk of the file)."""
        path = self.path / RUN_JSON
        slim = {**self.doc, "result": None, "status": "failed", "complete": False}
        attempts = [(self.doc, False), (self.doc, False), (self.doc, True), (slim, True)]
        reason = ""
        for i, (doc, compact) in enumerate(attempts):
            if i == 1:
                (self.path / RESERVE_FILE).unlink(missing_ok=True)  # room made for this write
            if doc is slim:
                slim["error"] = (self.doc["error"] + "; " if self.doc["error"] else "") + (
                    f"the engine result was not stored: {reason}"
                )
            try:
                write_json_atomic(path, doc, compact=compact)
            except OSError as exc:
                reason = describe_os_error(exc)
                continue
            if doc is slim:
                self.doc = slim
                self.failure = self.failure or f"results could not be written: {reason}"
            return
        problem = f"{path} could not be updated: {reason}"
        self.failure = f"{self.failure}; {problem}" if self.failure else problem
