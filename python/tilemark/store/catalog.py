"""The run catalog: a DuckDB index of run directories for fast listing and querying.

The catalog is a cache. Run directories are the source of truth: a missing, corrupt or
outdated catalog is rebuilt from their run.json files, and every listing first reconciles the
catalog with the directories actually present (runs added by crashed writers, runs deleted
by hand).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb

from tilemark.store.rundir import RUN_JSON, StoreError, read_run_json

CATALOG_FILE = "catalog.duckdb"
# Bumped when the table layout changes; an older catalog is simply rebuilt from run dirs.
CATALOG_VERSION = "1"
LOCK_WAIT_S = 5.0

COLUMNS = (
    ("run_id", "TEXT PRIMARY KEY"),
    ("started_at", "TIMESTAMP"),
    ("ended_at", "TIMESTAMP"),
    ("status", "TEXT"),
    ("complete", "BOOLEAN"),
    ("kind", "TEXT"),
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
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


class CatalogError(StoreError):
    """The catalog cannot be opened (held by another process) or written."""


def catalog_path(results_root: Path) -> Path:
    """Where the catalog of a results directory lives."""
    return Path(results_root) / CATALOG_FILE


def _is_lock_error(exc: Exception) -> bool:
    text = str(exc)
    return "Could not set lock" in text or "Conflicting lock" in text


def _connect_retrying(path: Path) -> duckdb.DuckDBPyConnection:
    """Open the catalog, waiting up to LOCK_WAIT_S while another process holds it."""
    deadline = time.monotonic() + LOCK_WAIT_S
    delay = 0.02
    while True:
        try:
            return duckdb.connect(str(path))
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


def _remove_catalog(path: Path) -> None:
    for f in (path, path.with_name(path.name + ".wal")):
        f.unlink(missing_ok=True)


def _create_tables(con: duckdb.DuckDBPyConnection) -> None:
    for table in ("runs", "run_files", "catalog_meta"):
        con.execute(f"DROP TABLE IF EXISTS {table}")
    con.execute(f"CREATE TABLE runs ({', '.join(f'{n} {t}' for n, t in COLUMNS)})")
    # What each run directory's run.json looked like when indexed, to notice later changes.
    con.execute("CREATE TABLE run_files (path TEXT PRIMARY KEY, run_id TEXT, signature TEXT)")
    con.execute("CREATE TABLE catalog_meta (key TEXT PRIMARY KEY, value TEXT)")
    con.execute("INSERT INTO catalog_meta VALUES ('catalog_version', ?)", [CATALOG_VERSION])


def _catalog_is_current(con: duckdb.DuckDBPyConnection) -> bool:
    tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    if not {"runs", "run_files", "catalog_meta"} <= tables:
        return False
    row = con.execute("SELECT value FROM catalog_meta WHERE key = 'catalog_version'").fetchone()
    if row is None or row[0] != CATALOG_VERSION:
        return False
    columns = [r[0] for r in con.execute("SELECT * FROM runs LIMIT 0").description]
    return tuple(columns) == COLUMN_NAMES


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


@contextmanager
def open_catalog(results_root: Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to an up-to-date catalog; a missing or corrupt one is rebuilt first."""
    root = Path(results_root)
    root.mkdir(parents=True, exist_ok=True)
    path = catalog_path(root)
    con = None
    try:
        try:
            con = _connect_retrying(path)
            current = _catalog_is_current(con)
        except duckdb.Error:
            # Not a readable DuckDB file (torn write, foreign file): it is only a cache.
            if con is not None:
                con.close()
            _remove_catalog(path)
            con = _connect_retrying(path)
            current = False
        if not current:
            with _transaction(con):
                _create_tables(con)
                _insert_all(con, root)
        yield con
    finally:
        if con is not None:
            con.close()


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


def catalog_row(run_json: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """The catalog columns of one run, derived from its run.json."""
    plan = run_json.get("plan") or {}
    workload = run_json.get("workload") or {}
    summary = run_json.get("summary") or {}
    total = summary.get("total") or {}
    targets = run_json.get("targets") or []
    target_paths = [str(t.get("path")) if isinstance(t, dict) else str(t) for t in targets]
    errors = total.get("errors")
    return {
        "run_id": run_json.get("run_id") or Path(run_dir).name,
        "started_at": _parse_time(run_json.get("started_at")),
        "ended_at": _parse_time(run_json.get("ended_at")),
        "status": run_json.get("status"),
        "complete": bool(run_json.get("complete")),
        "kind": run_json.get("kind") or "run",
        "workload_name": workload.get("name") if isinstance(workload, dict) else None,
        "target": ", ".join(target_paths) or None,
        "backend": plan.get("backend"),
        "streams": len(plan.get("streams") or []),
        "duration_s": summary.get("duration_s"),
        "total_iops": total.get("iops"),
        "total_mbps": total.get("mbps"),
        "errors": None if errors is None else int(errors),
        "path": str(Path(run_dir).resolve()),
        "tilemark_version": run_json.get("tilemark_version"),
    }


def _upsert(con: duckdb.DuckDBPyConnection, row: dict[str, Any]) -> None:
    placeholders = ", ".join("?" for _ in COLUMN_NAMES)
    con.execute(
        f"INSERT OR REPLACE INTO runs ({', '.join(COLUMN_NAMES)}) VALUES ({placeholders})",
        [row[name] for name in COLUMN_NAMES],
    )


def _file_signature(run_dir: Path) -> str | None:
    """Identity of a run.json as written: atomic rewrites change the inode, edits the mtime."""
    try:
        st = (Path(run_dir) / RUN_JSON).stat()
    except OSError:
        return None
    return f"{st.st_mtime_ns}:{st.st_size}:{st.st_ino}"


def _remember_file(con: duckdb.DuckDBPyConnection, path: str, run_id: str | None) -> None:
    con.execute(
        "INSERT OR REPLACE INTO run_files VALUES (?, ?, ?)",
        [path, run_id, _file_signature(Path(path))],
    )


def _run_dirs(root: Path) -> Iterator[Path]:
    if not root.is_dir():
        return
    for entry in sorted(root.iterdir()):
        if entry.is_dir() and (entry / RUN_JSON).is_file():
            yield entry


def _register_dir(con: duckdb.DuckDBPyConnection, run_dir: Path) -> bool:
    """(Re)index one run directory from its run.json; False if that file is unreadable."""
    path = str(Path(run_dir).resolve())
    previous = con.execute("SELECT run_id FROM run_files WHERE path = ?", [path]).fetchone()
    try:
        doc = read_run_json(run_dir)
    except StoreError:
        doc = None  # unreadable or from a newer tilemark: not listed, and left untouched
    row = catalog_row(doc, run_dir) if doc is not None else None
    if previous and previous[0] and (row is None or row["run_id"] != previous[0]):
        con.execute("DELETE FROM runs WHERE run_id = ? AND path = ?", [previous[0], path])
    if row is not None:
        _upsert(con, row)
    _remember_file(con, path, row["run_id"] if row else None)
    return row is not None


def _insert_all(con: duckdb.DuckDBPyConnection, root: Path) -> int:
    return sum(_register_dir(con, d) for d in _run_dirs(root))


def _sync(con: duckdb.DuckDBPyConnection, root: Path) -> None:
    """Reconcile the catalog with the run directories and run.json files on disk."""
    known = {
        path: (run_id, signature)
        for path, run_id, signature in con.execute("SELECT * FROM run_files").fetchall()
    }
    present = {str(d.resolve()): d for d in _run_dirs(root)}
    for path, run_dir in present.items():
        if path not in known or known[path][1] != _file_signature(run_dir):
            _register_dir(con, run_dir)
    for path in known.keys() - present.keys():
        run_id = known[path][0]
        con.execute("DELETE FROM runs WHERE run_id = ? AND path = ?", [run_id, path])
        con.execute("DELETE FROM run_files WHERE path = ?", [path])


def register(results_root: Path, run_json: dict[str, Any], run_dir: Path) -> None:
    """Add or update one run in the catalog."""
    try:
        with open_catalog(results_root) as con:
            row = catalog_row(run_json, run_dir)
            _upsert(con, row)
            _remember_file(con, row["path"], row["run_id"])
    except duckdb.Error as exc:
        raise CatalogError(f"cannot update the run catalog under {results_root}: {exc}") from exc


def rebuild(results_root: Path) -> int:
    """Recreate the catalog from the run directories; returns how many runs it holds."""
    root = Path(results_root)
    root.mkdir(parents=True, exist_ok=True)
    path = catalog_path(root)
    try:
        con = _connect_retrying(path)
    except duckdb.Error:
        _remove_catalog(path)
        con = _connect_retrying(path)
    try:
        with _transaction(con):
            _create_tables(con)
            return _insert_all(con, root)
    except duckdb.Error as exc:
        raise CatalogError(f"cannot rebuild the run catalog {path}: {exc}") from exc
    finally:
        con.close()


def _to_plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat(timespec="milliseconds") + "Z"
    return value


def list_runs(results_root: Path) -> list[dict[str, Any]]:
    """Every stored run, newest first; [] when the results directory does not exist."""
    root = Path(results_root)
    if not root.is_dir():
        return []
    try:
        with open_catalog(root) as con:
            with _transaction(con):
                _sync(con, root)
            cursor = con.execute(
                f"SELECT {', '.join(COLUMN_NAMES)} FROM runs "
                "ORDER BY started_at DESC NULLS LAST, run_id DESC"
            )
            rows = cursor.fetchall()
    except duckdb.Error as exc:
        raise CatalogError(f"cannot read the run catalog under {root}: {exc}") from exc
    return [{n: _to_plain(v) for n, v in zip(COLUMN_NAMES, r, strict=True)} for r in rows]
