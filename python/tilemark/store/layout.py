"""The names of a run directory's files, the results format's version, and the few file
helpers every writer shares. No pyarrow or DuckDB here: listing runs imports this, not the
readers of the data (intervals.py), which load only when data is read.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

INTERVALS_FILE = "intervals.parquet"
INTERVAL_LOG = "intervals.arrows"
# Left by runs of tilemark before schema 2: Parquet parts flushed every 10 intervals.
INTERVAL_PARTS_DIR = "intervals.parts"
# "discard" only comes from streams replaying a trace (the engine reports it for them alone).
OP_KINDS = ("read", "write", "sync", "discard")
VERSION_KEY = b"tilemark.schema_version"
# The results format's version: run.json and the interval files carry it and change together
# with docs/results-schema.md (rundoc.MIGRATIONS upgrades older run.json documents).
SCHEMA_VERSION = 4


def errno_name(exc: OSError) -> str:
    """`ENOSPC` for an OSError with errno 28; `OSError` when it carries no errno."""
    return errno.errorcode.get(exc.errno or 0, "OSError")


def describe_os_error(exc: OSError) -> str:
    """'No space left on device (ENOSPC)': the reason and the errno name users search for."""
    reason = exc.strerror or str(exc)
    return f"{reason} ({errno_name(exc)})" if exc.errno else reason


def fsync_dir(directory: Path) -> None:
    """Make a directory's entries (a created, renamed or removed file) durable."""
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


@contextmanager
def atomic_file(path: Path, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file that appears at `path` whole (written to a temporary file, fsync'ed, renamed)
    or not at all: on any failure the temporary file is removed and `path` is unchanged."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, mode, encoding=None if "b" in mode else "utf-8") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
