"""Run directories: run.json (provenance, plan, summary, result) and intervals.parquet.

Layout and columns are documented in docs/results-schema.md; that document and
SCHEMA_VERSION change together. A run directory is the source of truth; the catalog is an
index over run directories that can always be rebuilt from them.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

import tilemark
from tilemark import envinfo
from tilemark.hist import Histogram

SCHEMA_VERSION = 1
RUN_JSON = "run.json"
INTERVALS_FILE = "intervals.parquet"
# Finished row groups of a run in progress; each part is a complete Parquet file, so a run
# killed outright (SIGKILL, power loss) still leaves every flushed interval readable.
INTERVAL_PARTS_DIR = "intervals.parts"
FLUSH_INTERVALS = 10
# Also flush on row count so a run with thousands of streams keeps memory bounded.
FLUSH_ROWS = 20_000
OP_KINDS = ("read", "write", "sync")
PARQUET_VERSION_KEY = b"tilemark.schema_version"

# Upgrades of run.json documents: MIGRATIONS[v] turns a version-v document into version v+1.
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}

_LATENCY_STATS = ("mean", "p50", "p99", "p999", "max")
INTERVAL_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("interval", pa.int32()),
        ("phase", pa.string()),
        ("start_ns", pa.int64()),
        ("end_ns", pa.int64()),
        ("stream", pa.int32()),
        ("stream_name", pa.string()),
        ("op", pa.string()),
        ("ops", pa.int64()),
        ("bytes", pa.int64()),
        ("errors", pa.int64()),
        ("errors_json", pa.string()),
        *[(f"service_{s}_us", pa.float64()) for s in _LATENCY_STATS],
        *[(f"response_{s}_us", pa.float64()) for s in _LATENCY_STATS],
        ("lag_max_ns", pa.int64()),
        ("behind_ios", pa.int64()),
        ("service_hist", pa.string()),
        ("response_hist", pa.string()),
    ],
    metadata={PARQUET_VERSION_KEY: str(SCHEMA_VERSION).encode()},
)


class StoreError(Exception):
    """A results-store problem, stated in one sentence for the user."""


class RunNotFoundError(StoreError):
    """No run matches the given directory or run id."""


class RunFormatError(StoreError):
    """A run.json that this tilemark cannot read (unknown or missing schema_version)."""


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


def write_json_atomic(path: Path, doc: dict[str, Any]) -> None:
    """Write JSON to `path` so readers see the old or the new file, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _latency_us(hist: dict | None, prefix: str) -> dict[str, float | None]:
    h = Histogram.from_json(hist)
    values = {
        "mean": h.mean(),
        "p50": h.percentile(50.0),
        "p99": h.percentile(99.0),
        "p999": h.percentile(99.9),
        "max": float(h.max) if h.n else None,
    }
    return {f"{prefix}_{k}_us": (None if v is None else v / 1e3) for k, v in values.items()}


def _hist_text(hist: dict | None) -> str | None:
    return None if hist is None else json.dumps(hist, separators=(",", ":"))


def snapshot_rows(run_id: str, plan: dict, snapshot: dict) -> list[dict[str, Any]]:
    """intervals.parquet rows of one snapshot: one per stream and op kind with ops or errors.

    A stream that completed and failed nothing in the interval still gets one row with op
    null, so its lag and backlog (a stalled device) are not lost.
    """
    names = [s.get("name") for s in plan.get("streams", [])]
    rows = []
    for s in snapshot.get("streams", []):
        index = int(s["stream"])
        base = {
            "run_id": run_id,
            "interval": int(snapshot["interval"]),
            "phase": snapshot.get("phase"),
            "start_ns": int(snapshot["start_ns"]),
            "end_ns": int(snapshot["end_ns"]),
            "stream": index,
            "stream_name": names[index] if 0 <= index < len(names) else None,
            "lag_max_ns": int(s.get("lag_max_ns", 0)),
            "behind_ios": int(s.get("behind_ios", 0)),
        }
        stream_rows = []
        for kind in OP_KINDS:
            op = s.get(kind)
            if not op:
                continue
            errors = {str(k): int(v) for k, v in op.get("errors", {}).items()}
            ops = int(op.get("ops", 0))
            if ops == 0 and not any(errors.values()):
                continue
            response = op.get("response")
            stream_rows.append(
                {
                    **base,
                    "op": kind,
                    "ops": ops,
                    "bytes": int(op.get("bytes", 0)),
                    "errors": sum(errors.values()),
                    "errors_json": json.dumps(errors, sort_keys=True),
                    **_latency_us(op.get("service"), "service"),
                    # null response histogram (closed loop) -> null response columns
                    **_latency_us(response, "response"),
                    "service_hist": _hist_text(op.get("service")),
                    "response_hist": _hist_text(response),
                }
            )
        if not stream_rows:
            stream_rows.append({**base, "op": None, "ops": 0, "bytes": 0, "errors": 0})
        rows.extend(stream_rows)
    return rows


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


class RunWriter:
    """Writes one run directory as the run progresses; finish() seals it and catalogs it."""

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
        self._buffer: list[dict[str, Any]] = []
        self._buffered_intervals = 0
        self._parts = 0
        self._rows_written = 0
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
            "workload": workload,
            "plan": plan,
            "targets": targets,
            "environment": envinfo.collect(target_paths),
            "summary": None,
            "result": None,
            "files": {"intervals": INTERVALS_FILE},
        }
        # Written now, so even a run killed before its first interval leaves a trace.
        write_json_atomic(self.path / RUN_JSON, self.doc)

    @property
    def rows_written(self) -> int:
        """Interval rows flushed to disk so far."""
        return self._rows_written

    def add_snapshots(self, snaps: list[dict]) -> None:
        """Append interval snapshots; flushes a row group every FLUSH_INTERVALS intervals."""
        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished; no more intervals")
        for snap in snaps:
            self._buffer.extend(snapshot_rows(self.run_id, self.plan, snap))
            self._buffered_intervals += 1
            if self._buffered_intervals >= FLUSH_INTERVALS or len(self._buffer) >= FLUSH_ROWS:
                self.flush()

    def flush(self) -> None:
        """Write buffered rows as one finished Parquet part (one row group)."""
        if not self._buffer:
            self._buffered_intervals = 0
            return
        parts_dir = self.path / INTERVAL_PARTS_DIR
        parts_dir.mkdir(exist_ok=True)
        table = pa.Table.from_pylist(self._buffer, schema=INTERVAL_SCHEMA)
        part = parts_dir / f"part-{self._parts:06d}.parquet"
        tmp = parts_dir / f".{part.name}.tmp"
        pq.write_table(table, tmp, compression="zstd")
        os.replace(tmp, part)  # a part is either complete or absent
        self._parts += 1
        self._rows_written += len(self._buffer)
        self._buffer = []
        self._buffered_intervals = 0

    def _seal_intervals(self) -> None:
        """Combine the parts into intervals.parquet (one row group per part), then drop them."""
        parts_dir = self.path / INTERVAL_PARTS_DIR
        parts = sorted(parts_dir.glob("part-*.parquet")) if parts_dir.is_dir() else []
        final = self.path / INTERVALS_FILE
        tmp = self.path / f".{INTERVALS_FILE}.tmp"
        with pq.ParquetWriter(tmp, INTERVAL_SCHEMA, compression="zstd") as writer:
            for part in parts:  # one part in memory at a time
                writer.write_table(pq.read_table(part, schema=INTERVAL_SCHEMA))
        os.replace(tmp, final)
        _fsync_dir(self.path)
        shutil.rmtree(parts_dir, ignore_errors=True)

    def finish(
        self,
        result: dict | None,
        *,
        summary: dict | None,
        complete: bool,
        error: str | None = None,
    ) -> Path:
        """Flush intervals, write the final run.json, register in the catalog; the run dir."""
        from tilemark.store import catalog  # catalog imports this module: import at use

        if self._finished:
            raise StoreError(f"run {self.run_id} is already finished")
        self.flush()
        self._seal_intervals()
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
        write_json_atomic(self.path / RUN_JSON, self.doc)
        self._finished = True
        try:
            catalog.register(self.results_root, self.doc, self.path)
        except catalog.CatalogError as exc:
            # The run is safely on disk; the next `tilemark runs` adds it to the catalog.
            self.catalog_error = str(exc)
        return self.path


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
    """The Parquet files holding a run's intervals: intervals.parquet, or the flushed parts of
    an interrupted run. A file from a newer schema is refused, never reinterpreted."""
    run_dir = Path(run_dir)
    final = run_dir / INTERVALS_FILE
    if final.is_file():
        files = [final]
    else:
        parts_dir = run_dir / INTERVAL_PARTS_DIR
        files = sorted(parts_dir.glob("part-*.parquet")) if parts_dir.is_dir() else []
    for f in files:
        version = int((pq.read_schema(f).metadata or {}).get(PARQUET_VERSION_KEY, b"0"))
        if version > SCHEMA_VERSION:
            raise RunFormatError(
                f"{f} has schema_version {version}, newer than tilemark "
                f"{tilemark.__version__} reads (up to {SCHEMA_VERSION}); upgrade tilemark"
            )
    return files


def read_intervals(run_dir: Path) -> pa.Table:
    """Interval rows of a run as one table (see `interval_files`)."""
    tables = [pq.read_table(f) for f in interval_files(run_dir)]
    if not tables:
        return INTERVAL_SCHEMA.empty_table()
    return pa.concat_tables(tables)
