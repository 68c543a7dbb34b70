"""Results storage: one directory per run (the source of truth) and a DuckDB catalog over them.

Formats: docs/results-schema.md.
"""

from tilemark.store.catalog import (
    CatalogError,
    ForeignCatalogError,
    catalog_path,
    catalog_row,
    list_runs,
    rebuild,
    register,
)
from tilemark.store.intervals import INTERVAL_SCHEMA, SCHEMA_VERSION
from tilemark.store.rundir import RunWriter
from tilemark.store.rundoc import (
    MIGRATIONS,
    STATUSES,
    IntervalsError,
    RunFormatError,
    RunNotFoundError,
    RunState,
    StoreError,
    inspect_run,
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
    "STATUSES",
    "CatalogError",
    "ForeignCatalogError",
    "IntervalsError",
    "RunFormatError",
    "RunNotFoundError",
    "RunState",
    "RunWriter",
    "StoreError",
    "catalog_path",
    "catalog_row",
    "inspect_run",
    "list_runs",
    "load_run",
    "read_intervals",
    "rebuild",
    "register",
    "resolve_run_dir",
]
