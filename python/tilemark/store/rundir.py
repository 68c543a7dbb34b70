"""Run directories: run.json (provenance, plan, summary, result) and the interval rows.

Layout and columns are documented in docs/results-schema.md; that document and
SCHEMA_VERSION change together. A run directory is the source of truth; the catalog is an
index over run directories that can always be rebuilt from them.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

import tilemark
from tilemark import envinfo
from tilemark.store import process
from tilemark.store.intervals import (
    INTERVAL_LOG,
    INTERVALS_FILE,
    SCHEMA_VERSION,
    IntervalLog,
    IntervalSource,
    IntervalsUnreadable,
    atomic_file,
    describe_os_error,
    interval_source,
    read_source,
    seal,
    snapshot_rows,
)

RUN_JSON = "run.json"
# Space set aside when a run starts and released when it ends, so that a results filesystem
# that fills during the run still has room for the final run.json.
RESERVE_FILE = ".reserve"
RESERVE_BASE = 256 << 10
RESERVE_PER_STREAM = 32 << 10
RESERVE_MAX = 64 << 20

# Upgrades of run.json documents: MIGRATIONS[v] turns a version-v document into version v+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {
    # 2 records the writing process (pid, boot id) to tell killed runs from running ones.
    1: lambda doc: {**doc, "process": None},
}


class StoreError(Exception):
    """A results-store problem, stated in one sentence for the user."""


class RunNotFoundError(StoreError):
    """No run matches the given directory or run id."""


class RunFormatError(StoreError):
    """A run.json that this tilemark cannot read (unknown or missing schema_version)."""


class IntervalsError(StoreError):
    """A run's interval file cannot be read (truncated, corrupt, or from a newer tilemark)."""


def utc_now_iso() -> str:
    """Current UTC time as ISO 8601 with milliseconds and a Z suffix."""
    return _iso(datetime.now(UTC))


def _iso(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _engine_version() -> str | None:
    try:
        from tilemark import engine  # the compiled module may not be built: import lazily

        return engine.version()
    except Exception:
        return None


def write_json_atomic(path: Path, doc: dict[str, Any], *, compact: bool = False) -> None:
    """Write JSON to `path` so readers see the old or the new file, never a torn one; on
    failure the temporary file is removed and the old file is left as it was. Indented for
    people to read, or `compact` (a quarter of the size) when space is short."""
    with atomic_file(path, "w") as f:
        if compact:
            json.dump(doc, f, separators=(",", ":"))
        else:
            json.dump(doc, f, indent=2)
        f.write("\n")


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
    return new_id, path, _iso(started)


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
            "status": "running",
            "complete": False,
            "error": None,
            "argv": list(argv),
            "started_at": _iso(started),
            "ended_at": None,
            "process": process.current(),
            "workload": workload,
            "plan": plan,
            "targets": targets,
            "environment": envinfo.collect(target_paths),
            "summary": None,
            "result": None,
            "files": {"intervals": INTERVALS_FILE, "intervals_log": INTERVAL_LOG},
        }
        streams = len(plan.get("streams") or [])
        reserve = min(RESERVE_MAX, RESERVE_BASE + RESERVE_PER_STREAM * streams)
        try:
            # Written now, so even a run killed before its first interval leaves a trace.
            write_json_atomic(self.path / RUN_JSON, self.doc)
            self._log = IntervalLog(self.path / INTERVAL_LOG)
            _reserve(self.path / RESERVE_FILE, reserve)
        except OSError:
            # Nothing was measured yet: leave no half-made run behind.
            shutil.rmtree(self.path, ignore_errors=True)
            raise

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
            try:
                self._log.add(rows, int(snap["start_ns"]), int(snap["end_ns"]))
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc, first_lost=int(snap["interval"]))

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
    ) -> Path:
        """Seal the intervals, write the final run.json, register in the catalog; the run dir.

        A results filesystem that fills up leaves the run failed with the reason, the
        intervals that fit readable (sealed, or in the log), and no temporary file.
        """
        from tilemark.store import catalog  # catalog imports this module: import at use

        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished")
        self._finished = True
        if self.failure is None:
            try:
                self._log.close()
            except OSError as exc:
                self._fail(f"writing {self._log.path}", exc)
        self._log.discard_buffer()
        try:
            seal(self.path)
        except OSError as exc:
            if self.failure is None:
                self.failure = (
                    f"results could not be written: {describe_os_error(exc)} writing "
                    f"{self.path / INTERVALS_FILE}; the intervals are kept in {INTERVAL_LOG}"
                )
        if self.failure is not None:
            error = self.failure if error is None else f"{error}; {self.failure}"
        if error is not None:
            status = "failed"
        else:
            status = "complete" if complete else "incomplete"
        self.doc.update(
            status=status,
            complete=bool(complete) and error is None,
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
            catalog.register(self.results_root, self.path)
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


def migrate(doc: dict[str, Any], source: str) -> dict[str, Any]:
    """Bring a run.json document to SCHEMA_VERSION, or refuse it with a clear error."""
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise RunFormatError(f"{source} has no integer schema_version; it is not a tilemark run")
    if version > SCHEMA_VERSION:
        raise RunFormatError(
            f"{source} has schema_version {version}, newer than tilemark "
            f"{tilemark.__version__} reads (up to {SCHEMA_VERSION}); upgrade tilemark to read it"
        )
    while version < SCHEMA_VERSION:
        step = MIGRATIONS.get(version)
        if step is None:
            raise RunFormatError(
                f"{source} has schema_version {version}, which tilemark "
                f"{tilemark.__version__} cannot migrate to {SCHEMA_VERSION}"
            )
        doc = step(doc)
        version += 1
        doc["schema_version"] = version
    return doc


def resolve_run_dir(path_or_id: str | Path, results_root: Path | None = None) -> Path:
    """Run directory for a directory, a run.json path, a run id or a unique run id prefix."""
    given = Path(path_or_id)
    if given.name == RUN_JSON and given.is_file():
        return given.parent
    if (given / RUN_JSON).is_file():
        return given
    root = Path(results_root) if results_root is not None else Path("tilemark-results")
    candidate = root / str(path_or_id)
    if (candidate / RUN_JSON).is_file():
        return candidate
    prefix = str(path_or_id)
    matches = (
        sorted(p for p in root.iterdir() if p.name.startswith(prefix) and (p / RUN_JSON).is_file())
        if root.is_dir() and prefix and "/" not in prefix
        else []
    )
    if len(matches) == 1:
        return matches[0]
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches[:5])
        raise RunNotFoundError(f"run id {prefix!r} is ambiguous under {root}: {names}")
    raise RunNotFoundError(
        f"no run {str(path_or_id)!r}: not a run directory nor a run id under {root}"
    )


def read_run_json(run_dir: Path) -> dict[str, Any]:
    """The run.json of a run directory, migrated to the current schema."""
    source = Path(run_dir) / RUN_JSON
    try:
        doc = json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise RunNotFoundError(f"{source} does not exist") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RunFormatError(f"{source} cannot be read as JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise RunFormatError(f"{source} is not a JSON object; it is not a tilemark run")
    return migrate(doc, str(source))


def load_run(path_or_id: str | Path, results_root: Path | None = None) -> dict[str, Any]:
    """The run.json document of a run given by directory or run id, migrated to this schema."""
    return read_run_json(resolve_run_dir(path_or_id, results_root))


def interval_files(run_dir: Path) -> list[Path]:
    """The files holding a run's intervals: intervals.parquet, the log of a run that did not
    finish, or an older tilemark's Parquet parts. A file from a newer schema, or one that
    cannot be read at all, is refused (IntervalsError), never reinterpreted."""
    source = interval_source(run_dir)
    if source.problem is not None:
        raise IntervalsError(f"{Path(run_dir).name}: {source.problem}")
    return source.files


def read_intervals(run_dir: Path, columns: list[str] | None = None) -> pa.Table:
    """Interval rows of a run as one table, from whichever files hold them; IntervalsError
    when none can be read."""
    source = interval_source(run_dir)
    try:
        return read_source(source, columns)
    except IntervalsUnreadable as exc:
        raise IntervalsError(f"{Path(run_dir).name}: {exc}") from exc


# ---------------------------------------------------------------------------------------------
# what a run directory says, as listings and reports show it

STATUSES = ("running", "complete", "incomplete", "failed", "killed", "damaged")
# A run of an older tilemark (no process record) still "running" this long after its planned
# end was killed: no run outlives its plan by an hour.
UNRECORDED_GRACE = timedelta(hours=1)


@dataclass
class RunState:
    """A run directory as readers see it: run.json (None when unreadable), the status to show,
    and why it is not what run.json says (`problem`).

    status adds two to the ones run.json stores: `killed` (run.json says running but its
    process is gone) and `damaged` (run.json or the intervals cannot be read).
    """

    run_dir: Path
    doc: dict[str, Any] | None
    status: str
    problem: str | None
    intervals: IntervalSource

    @property
    def run_id(self) -> str:
        return str((self.doc or {}).get("run_id") or self.run_dir.name)


def inspect_run(run_dir: Path) -> RunState:
    """Read a run directory without changing it: its run.json, intervals and real status."""
    run_dir = Path(run_dir)
    intervals = interval_source(run_dir)
    try:
        doc = read_run_json(run_dir)
    except StoreError as exc:
        return RunState(run_dir, None, "damaged", str(exc), intervals)
    status = str(doc.get("status") or "running")
    problem = doc.get("error") if status == "failed" else None
    if status == "running":
        gone = _gone_reason(doc)
        if gone is not None:
            status, problem = "killed", f"the run never finished: {gone}"
    if intervals.problem is not None:
        problem = intervals.problem + (f" (run.json says {status})" if status else "")
        status = "damaged"
    return RunState(run_dir, doc, status, problem, intervals)


def _gone_reason(doc: dict[str, Any]) -> str | None:
    record = doc.get("process")
    if record is not None:
        return process.gone_reason(record)
    # Written by a tilemark that did not record its process: judge by the planned end.
    try:
        started = datetime.fromisoformat(str(doc.get("started_at")))
    except ValueError:
        return None
    plan = doc.get("plan") or {}
    planned_ms = int(plan.get("warmup_ms") or 0) + int(plan.get("duration_ms") or 0)
    end = started + timedelta(milliseconds=planned_ms)
    if datetime.now(UTC) - end > UNRECORDED_GRACE:
        return "no process was recorded and its planned end is more than an hour past"
    return None
