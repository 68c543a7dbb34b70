"""The run catalog: a DuckDB index of run directories for fast listing and querying.

The catalog is a cache. Run directories are the source of truth: a missing or outdated
catalog is rebuilt from their run.json files, and every listing first reconciles the catalog
with the directories actually present (runs added by crashed writers, runs deleted by hand,
runs whose process was killed).

tilemark changes only a catalog it can prove is its own (the `tilemark_catalog` marker table):
a file named catalog.duckdb that is anything else is refused, never dropped or replaced. A
results directory that cannot be written is listed from the run directories, read-only.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from tilemark.errors import UsageError
from tilemark.store import results
from tilemark.store.layout import INTERVAL_LOG, INTERVALS_FILE
from tilemark.store.rundoc import RUN_JSON, RunState, StoreError, inspect_run, read_run_json

CATALOG_FILE = "catalog.duckdb"
DATA_FILES = tuple(
    f"{name}.{ext}" for name in ("targets", "devices", "host") for ext in ("parquet", "arrows")
)
MARKER_TABLE = "tilemark_catalog"
MARKER_FORMAT = "tilemark run catalog"
# Bumped when the table layout changes; an older catalog of ours is rebuilt from run dirs.
CATALOG_VERSION = "3"
# Catalog version 1 had no marker table; it is recognised by its exact tables and version.
LEGACY_TABLES = {"runs", "run_files", "catalog_meta"}
OWN_TABLES = ("runs", "run_files", MARKER_TABLE)
LOCK_WAIT_S = 5.0
RUN_ID = re.compile(r"^(\d{8})-(\d{6})-[0-9a-f]{4}$")

COLUMNS = (
    ("run_id", "TEXT PRIMARY KEY"),
    ("started_at", "TIMESTAMP"),
    ("ended_at", "TIMESTAMP"),
    ("status", "TEXT"),
    ("complete", "BOOLEAN"),
    ("kind", "TEXT"),
    ("label", "TEXT"),
    ("workload_name", "TEXT"),
    ("target", "TEXT"),
    ("backend", "TEXT"),
    ("streams", "INTEGER"),
    ("duration_s", "DOUBLE"),
    ("total_iops", "DOUBLE"),
    ("total_mbps", "DOUBLE"),
    ("errors", "BIGINT"),
    ("path", "TEXT"),
    ("tilemark_version", "TEXT"),
    ("problem", "TEXT"),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


class CatalogError(StoreError):
    """The catalog cannot be opened (held by another process) or written."""


class ForeignCatalogError(CatalogError, UsageError):
    """catalog.duckdb exists but is not a tilemark catalog: it is left alone (exit 2)."""


def catalog_path(results_root: Path) -> Path:
    """Where the catalog of a results directory lives."""
    return Path(results_root) / CATALOG_FILE


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _connect_retrying(path: Path, *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """Open the catalog, waiting up to LOCK_WAIT_S while another process holds it."""
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.Error as exc:
            if not _is_lock_error(exc):
                raise
            if time.monotonic() >= deadline:
                pid = re.search(r"PID (\d+)", str(exc))
                holder = f" (held by process {pid.group(1)})" if pid else ""
                raise CatalogError(
                    f"the run catalog {path} is in use by another tilemark process{holder}; "
                    "try again when it finishes"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.25)


def _tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}


def _ownership(con: duckdb.DuckDBPyConnection) -> str:
    """ "current", "outdated" (ours, older layout), "empty" (no tables) or "foreign"."""
    tables = _tables(con)
    if not tables:
        return "empty"
    if MARKER_TABLE in tables:
        meta = dict(con.execute(f"SELECT key, value FROM {MARKER_TABLE}").fetchall())
        if meta.get("format") != MARKER_FORMAT:
            return "foreign"
        if meta.get("catalog_version") != CATALOG_VERSION or not set(OWN_TABLES) <= tables:
            return "outdated"
        columns = [r[0] for r in con.execute("SELECT * FROM runs LIMIT 0").description]
        return "current" if tuple(columns) == COLUMN_NAMES else "outdated"
    if tables == LEGACY_TABLES:
        row = con.execute("SELECT value FROM catalog_meta WHERE key = 'catalog_version'").fetchone()
        if row is not None and row[0] == "1":
            return "outdated"
    return "foreign"


def _foreign(path: Path, why: str) -> ForeignCatalogError:
    return ForeignCatalogError(
        f"{path} {why}; tilemark changes only its own catalog and leaves this file alone: "
        "move it away (a damaged tilemark catalog may be deleted; it is rebuilt from the run "
        "directories) or use another --results directory"
    )


def _check_own(path: Path) -> str:
    """Ownership of an existing catalog file, looked at read-only; refuses foreign files."""
    try:
        con = _connect_retrying(path, read_only=True)
    except CatalogError:
        raise
    except duckdb.Error as exc:
        raise _foreign(path, "is not a DuckDB database this tilemark can open") from exc
    try:
        owner = _ownership(con)
    except duckdb.Error as exc:
        raise _foreign(path, f"cannot be read as a tilemark catalog ({exc})") from exc
    finally:
        con.close()
    if owner == "foreign":
        raise _foreign(path, f"is a DuckDB database without tilemark's {MARKER_TABLE} table")
    return owner


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    # Only ever run on a catalog proven ours (or empty): these are our own tables.
    for table in (*OWN_TABLES, "catalog_meta"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in COLUMNS)})")
    # What each run directory's files looked like when indexed, to notice later changes.
    con.execute("CREATE TABLE run_files (path TEXT PRIMARY KEY, run_id TEXT, signature TEXT)")
    con.execute(f"CREATE TABLE {MARKER_TABLE} (key TEXT PRIMARY KEY, value TEXT)")
    con.execute(
        f"INSERT INTO {MARKER_TABLE} VALUES ('format', ?), ('catalog_version', ?)",
        [MARKER_FORMAT, CATALOG_VERSION],
    )


@contextmanager
def _transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    # One commit for many inserts: a rebuild over thousands of runs stays fast.
    con.begin()
    try:
        yield
    except BaseException:
        con.rollback()
        raise
    con.commit()


def writable(results_root: Path) -> bool:
    """Whether tilemark may write the catalog here (directory and file writable)."""
    root = Path(results_root)
    path = catalog_path(root)
    if not os.access(root, os.W_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


@contextmanager
def open_catalog(
    results_root: Path, registering: Path | None = None
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to an up-to-date catalog of ours; a missing or outdated one is (re)built.
    ForeignCatalogError for a catalog.duckdb tilemark did not write. `registering`: a run
    directory the caller registers itself, left out when the catalog is built."""
    root = Path(results_root)
    path = catalog_path(root)
    owner = "missing"
    if path.exists():
        owner = "current" if _OURS.get(str(path)) == _stamp(path) else _check_own(path)
    con = _connect_retrying(path)
    try:
        if owner != "current":
            with _transaction(con):
                _create_tables(con)
                _insert_all(con, root, registering)
        yield con
    except BaseException:
        _OURS.pop(str(path), None)
        raise
    finally:
        con.close()
    _OURS[str(path)] = _stamp(path)


# Catalogs this process left current, by path: the file's identity and last change when it
# closed them. The same file unchanged since needs no read-only look before it is opened for
# writing (a DuckDB connection costs 0.06-0.1 s; a run registers itself twice); a file that
# was replaced or written by anyone else is looked at again.
_OURS: dict[str, tuple[int, int, int, int]] = {}


def _stamp(path: Path) -> tuple[int, int, int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except (TypeError, ValueError):
        return None
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment  # DuckDB TIMESTAMP holds naive UTC


def _id_time(name: str) -> datetime | None:
    """The UTC start time a run id begins with (for runs whose run.json cannot be read)."""
    m = RUN_ID.match(name)
    if not m:
        return None
    try:
        return datetime.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S")
    except ValueError:
        return None


def catalog_row(run_json: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The catalog columns of one run, derived from its run.json (read typed)."""
    # The row needs none of the per-stream results (read_run_json checked them): converting
    # them typed took seconds for a run of 10,000 streams.
    light = {k: v for k, v in run_json.items() if k != "result"}
    if isinstance(light.get("summary"), dict):
        heavy = ("streams", "targets", "tool_bound")
        light["summary"] = {k: v for k, v in light["summary"].items() if k not in heavy}
    doc = results.read_run(light)
    summary = doc.summary or results.Summary()
    total = summary.total or results.Total()
    plan = doc.plan or results.Plan()
    target_paths = [str(t.path) for t in doc.targets or []]
    return {
        "run_id": doc.run_id or Path(run_dir).name,
        "started_at": _parse_time(doc.started_at),
        "ended_at": _parse_time(doc.ended_at),
        "status": doc.status,
        "complete": bool(doc.complete),
        "kind": doc.kind or "run",
        "label": doc.label,
        "workload_name": doc.workload.name if doc.workload else None,
        "target": ", ".join(target_paths) or None,
        "backend": plan.backend,
        "streams": len(plan.streams or plan.file_streams or []),
        "duration_s": summary.duration_s,
        "total_iops": total.iops,
        "total_mbps": total.mbps,
        "errors": None if total.errors is None else int(total.errors),
        "path": str(Path(run_dir).resolve()),
        "tilemark_version": doc.tilemark_version,
        "problem": doc.error,
    }


def state_row(state: RunState) -> dict[str, Any]:
    """The catalog columns of a run as readers see it: killed and damaged runs included."""
    run_dir = state.run_dir
    row = None
    if state.doc is not None:
        try:
            row = catalog_row(state.doc, run_dir)
        except (TypeError, ValueError, AttributeError, KeyError, results.DocumentError) as exc:
            # store/results.py checks what readers rely on; a value it lets through and this row
            # cannot use still makes one damaged run, never a listing that fails.
            state.status, state.problem = "damaged", f"run.json cannot be listed: {exc}"
    if row is None:
        row = dict.fromkeys(COLUMN_NAMES)
        row.update(
            run_id=run_dir.name,
            started_at=_id_time(run_dir.name),
            complete=False,
            path=str(run_dir.resolve()),
        )
    row["status"] = state.status
    row["problem"] = state.problem
    if state.status == "killed" and state.intervals.problem is None:
        # No summary was written: what the intervals it kept add up to.
        try:
            from tilemark.store.intervals import TOTAL_COLUMNS, source_batches, totals

            kept = totals(source_batches(state.intervals, TOTAL_COLUMNS))
        except Exception as exc:  # a log that reads as complete can still fail to convert
            row["problem"] = f"{state.problem}; its intervals cannot be read: {exc}"
        else:
            row.update(
                duration_s=kept["duration_s"],
                total_iops=kept["iops"],
                total_mbps=kept["mbps"],
                errors=kept["errors"],
            )
            row["problem"] = f"{state.problem}; {kept['intervals']} intervals kept"
        if state.intervals.note:
            row["problem"] += f" ({state.intervals.note})"
    return row


def _upsert(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    con.execute(
        f"INSERT OR REPLACE INTO runs ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})",
        [row[name] for name in COLUMN_NAMES],
    )


def _file_signature(run_dir: Path) -> str:
    """Identity of a run's files as written: atomic rewrites change the inode, appends and
    edits the size and mtime."""
    parts = []
    # Every data file a run writes (rundoc.DATA_FILE_KEYS): one deleted makes the run damaged.
    for name in (RUN_JSON, INTERVALS_FILE, INTERVAL_LOG, *DATA_FILES):
        try:
            st = (Path(run_dir) / name).stat()
        except OSError:
            parts.append("-")
            continue
        parts.append(f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}")
    return "/".join(parts)


def run_dirs(root: Path) -> Iterator[Path]:
    """Run directories under a results directory (holding run.json), by name."""
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        # Dot names are tilemark's own work in progress (a run being deleted).
        if not entry.name.startswith(".") and entry.is_dir() and (entry / RUN_JSON).is_file():
            yield entry


def started_at(run_dir: Path) -> datetime | None:
    """When a run started (naive UTC): from run.json, else from its id."""
    try:
        moment = _parse_time(read_run_json(run_dir).get("started_at"))
    except StoreError:
        moment = None
    return moment or _id_time(Path(run_dir).name)


def check_catalog(results_root: Path) -> None:
    """Refuse (ForeignCatalogError) when the results directory holds a catalog.duckdb that
    is not tilemark's; looks at it read-only."""
    path = catalog_path(results_root)
    if path.exists():
        _check_own(path)


def has_runs(results_root: Path) -> bool:
    """Whether a directory holds at least one run directory."""
    return next(run_dirs(Path(results_root)), None) is not None


def _register_dir(
    con: duckdb.DuckDBPyConnection, run_dir: Path, doc: dict[str, Any] | None = None
) -> None:
    """(Re)index one run directory as it is now (`doc`: its run.json as just written)."""
    path = str(Path(run_dir).resolve())
    previous = con.execute("SELECT run_id FROM run_files WHERE path = ?", [path]).fetchone()
    row = state_row(inspect_run(run_dir, doc))
    if previous and previous[0] and row["run_id"] != previous[0]:
        con.execute("DELETE FROM runs WHERE run_id = ? AND path = ?", [previous[0], path])
    _upsert(con, row)
    con.execute(
        "INSERT OR REPLACE INTO run_files VALUES (?, ?, ?)",
        [path, row["run_id"], _file_signature(run_dir)],
    )


def _insert_all(con: duckdb.DuckDBPyConnection, root: Path, skip: Path | None = None) -> int:
    skipped = None if skip is None else Path(skip).resolve()
    dirs = [d for d in run_dirs(root) if d.resolve() != skipped]
    for d in dirs:
        _register_dir(con, d)
    return len(dirs)


def _sync(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Reconcile the catalog with the run directories on disk and the processes running."""
    known = {
        path: (run_id, signature)
        for path, run_id, signature in con.execute("SELECT * FROM run_files").fetchall()
    }
    # A run still running may have been killed since the last listing: check it every time.
    running = {
        r[0] for r in con.execute("SELECT path FROM runs WHERE status = 'running'").fetchall()
    }
    present = {str(d.resolve()): d for d in run_dirs(root)}
    for path, run_dir in present.items():
        if path not in known or known[path][1] != _file_signature(run_dir) or path in running:
            _register_dir(con, run_dir)
    _forget_paths(con, known.keys() - present.keys())


def _forget_paths(con: duckdb.DuckDBPyConnection, paths: Iterable[str]) -> None:
    for path in paths:
        con.execute("DELETE FROM runs WHERE path = ?", [path])
        con.execute("DELETE FROM run_files WHERE path = ?", [path])


def register(results_root: Path, run_dir: Path, doc: dict[str, Any] | None = None) -> None:
    """Add or update one run in the catalog, as its directory is now (creating the catalog if
    there is none); `doc` is its run.json as the caller just wrote it, not read back."""
    # The first run under a results root creates the catalog, which indexes every run
    # directory there but this one: it is registered from its document, not read back (a run
    # of 10,000 streams writes 110 MB of run.json; reading and checking it again took 4 s).
    try:
        with open_catalog(results_root, Path(run_dir) if doc is not None else None) as con:
            _register_dir(con, Path(run_dir), doc)
    except duckdb.Error as exc:
        raise CatalogError(f"cannot update the run catalog under {results_root}: {exc}") from exc


def forget(results_root: Path, run_dirs: Iterable[Path]) -> None:
    """Drop catalog rows of run directories that were deleted (no catalog: nothing to do)."""
    root = Path(results_root)
    if not catalog_path(root).exists() or not writable(root):
        return
    paths = [str(Path(d).resolve()) for d in run_dirs]
    try:
        with open_catalog(root) as con, _transaction(con):
            _forget_paths(con, paths)
    except duckdb.Error as exc:
        raise CatalogError(f"cannot update the run catalog under {root}: {exc}") from exc


def rebuild(results_root: Path) -> int:
    """Recreate the catalog from the run directories; returns how many runs it holds."""
    root = Path(results_root)
    path = catalog_path(root)
    if path.exists():
        _check_own(path)
    try:
        con = _connect_retrying(path)
        try:
            with _transaction(con):
                _create_tables(con)
                return _insert_all(con, root)
        finally:
            con.close()
    except duckdb.Error as exc:
        raise CatalogError(f"cannot rebuild the run catalog {path}: {exc}") from exc


def _to_plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds") + "Z"
    return value


_ORDER = "ORDER BY started_at DESC NULLS LAST, run_id DESC"


def list_runs(results_root: Path) -> list[dict[str, Any]]:
    """Every stored run, newest first, with its status as readers see it (killed, damaged).

    Uses and updates the catalog when the directory is writable; creates one only where runs
    exist. A read-only results directory is listed from its run directories alone.
    [] when the results directory does not exist.
    """
    root = Path(results_root)
    if not root.is_dir():
        return []
    select = f"SELECT {', '.join(COLUMN_NAMES)} FROM runs {_ORDER}"
    if not writable(root) or (not catalog_path(root).exists() and not has_runs(root)):
        con = duckdb.connect()  # in memory: nothing is written
        try:
            _create_tables(con)
            _insert_all(con, root)
            rows = con.execute(select).fetchall()
        finally:
            con.close()
    else:
        try:
            with open_catalog(root) as con:
                with _transaction(con):
                    _sync(con, root)
                rows = con.execute(select).fetchall()
        except duckdb.Error as exc:
            raise CatalogError(f"cannot read the run catalog under {root}: {exc}") from exc
    return [{n: _to_plain(v) for n, v in zip(COLUMN_NAMES, r, strict=True)} for r in rows]
