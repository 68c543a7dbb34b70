"""The traces a profile is learned from, loaded as columns (docs/learn.md).

Learning needs the IOs of one device in issue order, with the process that issued each. Several
traces of one application are laid end to end (each shifted to start after the previous one),
so the model sees one longer observation. A trace holding several devices (a capture of a loop
device also records its backing disk) must be narrowed with `--device`.

Memory: the columns are held in numpy arrays, about 40 bytes per request (a ten-million-request
trace takes 400 MB); learning is a batch job over traces of minutes, not a stream over days.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilemark.errors import UsageError
from tilemark.trace.columns import numbers, strings

# The fewest reads and writes a model is fitted from: below this the shares, size mix and
# placement of even one stream rest on a handful of IOs.
MIN_IOS = 200


@dataclass(frozen=True)
class Source:
    """One trace file a model was learned from: what identifies it later."""

    path: str
    rows: int  # requests of the learned device
    span_s: float  # first to last issue
    file_bytes: int
    fingerprint: str  # sha256 of the Parquet footer (schema, row groups, metadata)
    device: str | None


@dataclass
class Columns:
    """The learned device's requests, all traces end to end, in issue order."""

    issue: np.ndarray  # int64 ns
    complete: np.ndarray  # float64 ns, inf when unknown
    op: np.ndarray  # object: read | write | flush | discard
    offset: np.ndarray  # int64 bytes
    size: np.ndarray  # int64 bytes
    sync: np.ndarray  # bool
    fua: np.ndarray  # bool
    pid: np.ndarray  # int64, -1 when unknown
    comm: np.ndarray  # object, "" when unknown
    span_ns: int  # first issue to last issue, gaps between traces excluded
    sources: list[Source]
    device_size: int | None

    @property
    def data(self) -> np.ndarray:
        """Mask of reads and writes."""
        return (self.op == "read") | (self.op == "write")


def fingerprint(path: Path) -> str:
    """sha256 of the file's Parquet footer (its schema, row groups with their statistics, and
    key-value metadata, as stored): a changed trace has another one, a copy the same."""
    with open(path, "rb") as f:
        f.seek(-8, os.SEEK_END)
        tail = f.read(8)
        if tail[4:] != b"PAR1":
            raise UsageError(f"trace {path} is not a Parquet file (no footer).")
        length = int.from_bytes(tail[:4], "little")
        f.seek(-8 - length, os.SEEK_END)
        footer = f.read(length)
    return hashlib.sha256(footer).hexdigest()


def _one(path: Path, device: str | None) -> tuple[dict[str, np.ndarray], Source, int | None]:
    import pyarrow.compute as pc

    from tilemark.trace.schema import open_trace

    trace = open_trace(path)
    cols = ["issue_ns", "complete_ns", "op", "offset", "size", "sync", "fua", "pid", "comm"]
    cols.append("device")
    table = trace.table(cols)
    devices = sorted(d for d in pc.unique(table.column("device")).to_pylist() if d is not None)
    if device is not None:
        if device not in devices:
            raise UsageError(
                f"trace {path} has no requests of device {device} (it has "
                f"{', '.join(devices) or 'no device column'}); name one with --device."
            )
        # (in numpy, below: an Arrow filter by a Python string imports pandas)
    elif len(devices) > 1:
        counts = pc.value_counts(table.column("device")).to_pylist()
        listed = ", ".join(f"{c['values']} ({c['counts']} requests)" for c in counts)
        raise UsageError(
            f"trace {path} mixes devices ({listed}); learn one of them with --device ID."
        )
    out: dict[str, np.ndarray] = {}
    for name in ("issue_ns", "offset", "size"):
        out[name] = numbers(table.column(name), np.int64)
    out["complete_ns"] = numbers(table.column("complete_ns"), np.float64, np.inf)
    out["op"] = strings(table.column("op"))
    for name in ("sync", "fua"):
        out[name] = numbers(table.column(name), np.bool_, False)
    out["pid"] = numbers(table.column("pid"), np.int64, -1)
    out["comm"] = strings(table.column("comm"), "")
    if device is not None:
        mine = strings(table.column("device")) == device
        out = {k: v[mine] for k, v in out.items()}
    order = np.argsort(out["issue_ns"], kind="stable")
    out = {k: v[order] for k, v in out.items()}
    n = len(out["issue_ns"])
    span = int(out["issue_ns"][-1] - out["issue_ns"][0]) if n else 0
    source = Source(
        path=str(path),
        rows=n,
        span_s=span / 1e9,
        file_bytes=os.path.getsize(path),
        fingerprint=fingerprint(path),
        device=device or (devices[0] if devices else None),
    )
    return out, source, trace.meta.device_size


def load(paths: list[Path], device: str | None) -> Columns:
    """The requests of `paths` (one device), end to end; UsageError for too few IOs or a
    trace mixing devices without `device`."""
    if not paths:
        raise UsageError("name at least one trace file to learn from.")
    parts, sources, sizes = [], [], []
    for p in paths:
        cols, source, size = _one(p, device)
        parts.append(cols)
        sources.append(source)
        sizes.append(size)
    shifted = []
    at = 0
    span = 0
    for cols in parts:
        if len(cols["issue_ns"]) == 0:
            continue
        first, last = int(cols["issue_ns"][0]), int(cols["issue_ns"][-1])
        gaps = np.diff(cols["issue_ns"])
        step = int(np.median(gaps)) if len(gaps) else 0
        delta = at - first
        cols = dict(cols)
        cols["issue_ns"] = cols["issue_ns"] + delta
        cols["complete_ns"] = cols["complete_ns"] + delta
        shifted.append(cols)
        span += last - first
        at += last - first + max(step, 1)
    merged = {k: np.concatenate([c[k] for c in shifted]) for k in parts[0]} if shifted else {}
    ops = merged.get("op", np.empty(0, dtype=object))
    data = int(((ops == "read") | (ops == "write")).sum())
    if data < MIN_IOS:
        where = paths[0] if len(paths) == 1 else f"the {len(paths)} traces"
        on = f" of device {device}" if device else ""
        raise UsageError(
            f"{where} has {data} reads and writes{on}; a model needs at least {MIN_IOS} "
            "(capture longer or while the application is busier)."
        )
    known = [s for s in sizes if s]
    return Columns(
        issue=merged["issue_ns"],
        complete=merged["complete_ns"],
        op=ops,
        offset=merged["offset"],
        size=merged["size"],
        sync=merged["sync"],
        fua=merged["fua"],
        pid=merged["pid"],
        comm=merged["comm"],
        span_ns=max(span, 1),
        sources=sources,
        device_size=max(known) if known else None,
    )
