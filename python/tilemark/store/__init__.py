"""Results storage: one directory per run (the source of truth) and a DuckDB catalog over them.

Formats: docs/results-schema.md.
"""

from tilemark.store.catalog import (
    CatalogError,
    catalog_path,
    catalog_row,
    list_runs,
    rebuild,
    register,
)
from tilemark.store.rundir import (
    INTERVAL_SCHEMA,
    MIGRATIONS,
    SCHEMA_VERSION,
    RunFormatError,
    RunNotFoundError,
    RunWriter,
    StoreError,
    interval_files,
    load_run,
    read_intervals,
    resolve_run_dir,
)

__all__ = [
    "interval_files",
    "INTERVAL_SCHEMA",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "CatalogError",
    "RunFormatError",
    "RunNotFoundError",
    "RunWriter",
    "StoreError",
    "catalog_path",
    "catalog_row",
    "list_runs",
    "load_run",
    "read_intervals",
    "rebuild",
    "register",
    "resolve_run_dir",
]
