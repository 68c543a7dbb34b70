"""array.parquet: counters from the storage side, attached to a stored run (`tilemark attach`).

One row per sample and counter (long format, so sources with different counters and sampling
times sit in one file), aligned with the run's clock: `t_ns` since the run started, the
tilemark interval it falls in and that interval's phase. Attaching a source again replaces its
rows; other sources are kept. The file is written whole or not at all (atomic_file), and never
by a run: run.json is not changed by attaching. Format: docs/results-schema.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from tilemark.store.intervals import read_parquet
from tilemark.store.layout import SCHEMA_VERSION, VERSION_KEY, atomic_file

ARRAY_FILE = "array.parquet"
SOURCES_KEY = b"tilemark.array_sources"
ARRAY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("source", pa.string()),
        ("counter", pa.string()),
        ("time_ns", pa.int64()),  # UTC, ns since the epoch, after --offset
        ("t_ns", pa.int64()),  # since the run started (the intervals' clock)
        ("interval", pa.int32()),
        ("phase", pa.string()),
        ("value", pa.float64()),  # null: the cell was empty
    ]
)


class ArrayUnreadable(Exception):
    """array.parquet exists but cannot be read (the message says why)."""


def read_array(run_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(rows, sources) of a run's array.parquet; ([], []) when nothing is attached."""
    path = Path(run_dir) / ARRAY_FILE
    if not path.is_file():
        return [], []
    try:
        table = read_parquet(path)
    except (OSError, pa.ArrowException) as e:
        raise ArrayUnreadable(f"{path} cannot be read: {e}") from None
    meta = table.schema.metadata or {}
    version = int(meta.get(VERSION_KEY, b"0") or 0)
    if version > SCHEMA_VERSION:
        raise ArrayUnreadable(
            f"{path} has schema_version {version}, newer than tilemark reads "
            f"({SCHEMA_VERSION}); upgrade tilemark"
        )
    try:
        sources = json.loads(meta.get(SOURCES_KEY, b"[]"))
    except (ValueError, RecursionError) as exc:
        raise ArrayUnreadable(f"{path} has damaged source metadata ({exc})") from None
    return table.to_pylist(), sources


def write_array(run_dir: Path, source: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    """Add (or replace) one source's rows in the run's array.parquet; returns its path."""
    path = Path(run_dir) / ARRAY_FILE
    kept, sources = read_array(run_dir)
    kept = [r for r in kept if r["source"] != source["name"]]
    sources = [s for s in sources if s["name"] != source["name"]] + [source]
    merged = kept + rows
    merged.sort(key=lambda r: (r["source"], r["t_ns"], r["counter"]))
    table = pa.Table.from_pylist(merged, schema=ARRAY_SCHEMA)
    table = table.replace_schema_metadata(
        {VERSION_KEY: str(SCHEMA_VERSION).encode(), SOURCES_KEY: json.dumps(sources).encode()}
    )
    with atomic_file(path) as f:
        pq.write_table(table, f)
    return path
