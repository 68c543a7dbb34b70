"""A file workload as the user writes it (TOML), parsed into frozen specs before any IO.

name = "varmail"
duration = "30s"
[[fileset]]
name = "mail"
path = "/mnt/nas/tm"          # the directory handed over: the set lives in it
depth = 0                     # directory levels below path (0: files in path itself)
width = 1                     # subdirectories per level
files = 1000                  # entries; prealloc % of them exist after prepare
prealloc = 80
size = "gamma:16k"            # "16k", "4k:50,16k:30,64k:20" or "gamma:MEAN"
[[filestream]]
name = "mail"
fileset = "mail"
sequence = "delete,create,append,fsync,close,open,read,append,fsync,close,open,read,close"
# or: ops = "open:1,read:4,close:1,stat:2,create:0.5,append:1,fsync:0.5,delete:0.5"
threads = 16
select = "uniform"            # or "zipf:1.2", "hot:0.2:0.8", "sequential"
append = "16k"
read = "whole"                # or a size read from the start of the file
rate = 100                    # optional: open loop, ops/s (loops/s for a sequence)
arrival = "poisson"           # or "constant" (with rate)
openfiles = 16
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

from tilemark.errors import UsageError
from tilemark.options import NAME_RE, shown
from tilemark.units import parse_duration, parse_iops, parse_size

OPS = (
    "open",
    "read",
    "close",
    "stat",
    "create",
    "append",
    "fsync",
    "delete",
    "rename",
    "mkdir",
    "rmdir",
    "statdir",
    "setattr",
    "truncate",
    "fallocate",
)  # fmt: skip  (the engine's FileOp order)
READ_OPS = frozenset({"open", "read", "close", "stat", "statdir"})
WRITE_OPS = frozenset(OPS) - READ_OPS
ENTRY_KINDS = ("files", "dirs")  # what a set's prepared entries are
FILESET_KEYS = (
    "name", "path", "depth", "width", "files", "prealloc", "size", "seed", "kind", "sync",
)  # fmt: skip
STREAM_KEYS = (
    "name", "fileset", "ops", "sequence", "threads", "select", "append", "read", "rate",
    "arrival", "openfiles", "io_size", "seed", "unit", "limit", "truncate",
)  # fmt: skip
TOP_KEYS = (
    "name", "duration", "interval", "max_errors", "backend", "fileset", "filestream", "qos",
)  # fmt: skip
BACKENDS = ("psync", "uring")
MAX_FILES = 10_000_000
MAX_DEPTH = 8
MAX_WIDTH = 1000
MAX_DIRS = 100_000
MAX_FILE_SIZE = 1 << 40
GAMMA_SHAPE = 1.5  # Filebench's default gamma for file sizes (its `gamma = 1500`, /1000)


@dataclass(frozen=True)
class SizeDist:
    """File sizes: a constant, a weighted mix of sizes, or a gamma distribution by its mean
    (Filebench's shape 1.5). `text` is what the user wrote (part of the set's description)."""

    kind: str  # "fixed" | "mix" | "gamma"
    sizes: tuple[tuple[int, float], ...]  # fixed: ((size, 1),); mix: (size, weight)...
    mean: int  # gamma: the mean
    text: str

    def draw(self, rng: Any) -> int:
        """One size from `rng` (random.Random)."""
        if self.kind == "gamma":
            v = rng.gammavariate(GAMMA_SHAPE, self.mean / GAMMA_SHAPE)
            return min(int(v), MAX_FILE_SIZE)
        if self.kind == "fixed":
            return self.sizes[0][0]
        return rng.choices([s for s, _ in self.sizes], [w for _, w in self.sizes])[0]


def parse_size_dist(value: object, field: str) -> SizeDist:
    """'16k', '4k:50,16k:50' or 'gamma:16k'."""
    if not isinstance(value, str | int):
        raise UsageError(
            f"{field} must be a size, a mix like '4k:50,16k:50' or 'gamma:16k', got {shown(value)}."
        )
    text = str(value).strip()
    if text.lower().startswith("gamma:"):
        mean = parse_size(text[6:], field)
        if not 0 < mean <= MAX_FILE_SIZE:
            raise UsageError(f"{field}: the gamma mean must be 1 byte to 1 TiB, got {text!r}.")
        return SizeDist("gamma", (), mean, text)
    if ":" in text or "," in text:
        sizes = []
        for part in text.split(","):
            size, colon, weight = part.partition(":")
            if not colon:
                raise UsageError(f"{field}: '{part}' must be SIZE:WEIGHT (e.g. '4k:50').")
            try:
                w = float(weight)
            except ValueError:
                raise UsageError(f"{field}: weight {weight!r} is not a number.") from None
            if not (w >= 0 and math.isfinite(w)):
                raise UsageError(f"{field}: weight {weight!r} must be >= 0.")
            sizes.append((_file_size(size, field), w))
        if sum(w for _, w in sizes) <= 0:
            raise UsageError(f"{field}: at least one weight must be > 0.")
        return SizeDist("mix", tuple(sizes), 0, text)
    return SizeDist("fixed", ((_file_size(text, field), 1.0),), 0, text)


def _file_size(value: object, field: str) -> int:
    size = parse_size(value, field)
    if size > MAX_FILE_SIZE:
        raise UsageError(f"{field}: a file is at most 1 TiB, got {shown(value)}.")
    return size


@dataclass(frozen=True)
class FilesetSpec:
    """A file set: where it lives and its shape."""

    name: str
    path: str  # absolute, no '..'
    depth: int
    width: int
    files: int
    prealloc: float  # percent of entries that exist after prepare
    size: SizeDist
    seed: int
    kind: str = "files"  # "dirs": the prepared entries are empty directories (size unused)
    sync: bool = False  # prepare ends with syncfs: the run starts with the set on disk

    @property
    def leaf_dirs(self) -> int:
        return self.width**self.depth

    def description(self) -> dict[str, Any]:
        """What makes two sets the same (kept in the set's marker; `kind` only when it is
        not files, so sets prepared before it existed are reused as they are)."""
        d: dict[str, Any] = {
            "depth": self.depth,
            "width": self.width,
            "files": self.files,
            "prealloc": self.prealloc,
            "size": self.size.text,
            "seed": self.seed,
        }
        if self.kind != "files":
            d["kind"] = self.kind
        return d


@dataclass(frozen=True)
class FileStreamSpec:
    """A stream of file operations over one set."""

    name: str
    fileset: str
    ops: tuple[tuple[str, float], ...]
    sequence: bool
    threads: int
    # ("uniform", 0) | ("sequential", 0) | ("zipf", theta) | ("hot", share, probability)
    select: tuple[str, float] | tuple[str, float, float]
    append: int
    read: int  # 0: the whole file
    rate: float | None
    poisson: bool
    openfiles: int
    io_size: int
    seed: int
    unit: str = "loops"  # what one loop of a sequence is (messages, pages, ...)
    limit: int | None = None  # operations (a mix) or loops (a sequence), then the stream ends
    truncate: int = 0  # the size a truncate sets the held file to

    @property
    def writes(self) -> bool:
        return any(op in WRITE_OPS for op, _ in self.ops)


@dataclass(frozen=True)
class FileWorkload:
    name: str
    duration_s: float
    interval_s: float
    max_errors: int
    filesets: tuple[FilesetSpec, ...]
    streams: tuple[FileStreamSpec, ...]
    backend: str = "psync"  # "uring": each stream's threads are io_uring slots of one thread
    qos: tuple[Any, ...] = ()  # qos.QosSpec

    def fileset(self, name: str) -> FilesetSpec:
        return next(f for f in self.filesets if f.name == name)


def _int(table: dict[str, Any], key: str, where: str, lo: int, hi: int, default: int) -> int:
    v = table.get(key, default)
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise UsageError(f"{where}: {key} must be a whole number {lo} to {hi:,}, got {shown(v)}.")
    return v


def _name(table: dict[str, Any], where: str) -> str:
    name = table.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError(
            f"{where}: name must be letters, digits and _.:+- (up to 64), got {shown(name)}."
        )
    return name


def _unknown(table: dict[str, Any], keys: tuple[str, ...], where: str) -> None:
    extra = sorted(set(table) - set(keys))
    if extra:
        raise UsageError(f"{where}: unknown key '{extra[0]}'; allowed keys are {', '.join(keys)}.")


def parse_fileset_path(value: object, where: str) -> str:
    """The set's directory: absolute (made so), and never with a '..' component (a set must be
    exactly the directory named, not somewhere a '..' leads)."""
    if not isinstance(value, str) or not value.strip() or "\0" in value:
        raise UsageError(f"{where}: path must name a directory, got {shown(value)}.")
    if ".." in value.replace("\\", "/").split("/"):
        raise UsageError(
            f"{where}: path {value!r} climbs out with '..'; name the set's directory itself."
        )
    path = os.path.abspath(os.path.expanduser(value))
    if path == "/":
        raise UsageError(f"{where}: path must not be the root directory; name a directory.")
    return path


def parse_fileset(table: object, index: int) -> FilesetSpec:
    where = f"[[fileset]] {index + 1}"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table (name, path, depth, width, files, size).")
    _unknown(table, FILESET_KEYS, where)
    name = _name(table, where)
    where = f"fileset '{name}'"
    if "path" not in table:
        raise UsageError(f"{where} has no path; name the directory the set lives in.")
    path = parse_fileset_path(table["path"], where)
    depth = _int(table, "depth", where, 0, MAX_DEPTH, 0)
    width = _int(table, "width", where, 1, MAX_WIDTH, 1)
    if width**depth > MAX_DIRS:
        raise UsageError(
            f"{where}: width {width} to depth {depth} makes {width**depth:,} directories; "
            f"at most {MAX_DIRS:,}."
        )
    files = _int(table, "files", where, 1, MAX_FILES, 1000)
    prealloc = table.get("prealloc", 100)
    if isinstance(prealloc, bool) or not isinstance(prealloc, int | float):
        raise UsageError(f"{where}: prealloc must be a percentage 0 to 100, got {shown(prealloc)}.")
    if not 0 <= prealloc <= 100:
        raise UsageError(f"{where}: prealloc must be a percentage 0 to 100, got {prealloc!r}.")
    size = parse_size_dist(table.get("size", "16k"), f"{where}: size")
    seed = _int(table, "seed", where, 0, 2**62, 1)
    kind = table.get("kind", "files")
    if kind not in ENTRY_KINDS:
        raise UsageError(
            f"{where}: kind must be 'files' or 'dirs' (what the prepared entries are), "
            f"got {shown(kind)}."
        )
    sync = table.get("sync", False)
    if not isinstance(sync, bool):
        raise UsageError(f"{where}: sync must be true or false, got {shown(sync)}.")
    return FilesetSpec(name, path, depth, width, files, float(prealloc), size, seed, kind, sync)


def parse_ops(value: object, where: str, sequence: bool) -> tuple[tuple[str, float], ...]:
    """'open:1,read:4' (a mix) or 'delete,create,append' (a sequence)."""
    key = "sequence" if sequence else "ops"
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{where}: {key} must be a string like 'open:1,read:4,close:1'.")
    out = []
    for part in value.split(","):
        op, colon, weight = part.strip().partition(":")
        if op not in OPS:
            raise UsageError(
                f"{where}: {key} names '{excerpt_op(op)}'; operations are {', '.join(OPS)}."
            )
        if sequence:
            if colon:
                raise UsageError(f"{where}: a sequence lists operations in order, no weights.")
            out.append((op, 1.0))
            continue
        try:
            w = float(weight) if colon else 1.0
        except ValueError:
            raise UsageError(f"{where}: weight of {op} ({weight!r}) is not a number.") from None
        if not (w >= 0 and math.isfinite(w)):
            raise UsageError(f"{where}: weight of {op} must be >= 0, got {weight!r}.")
        out.append((op, w))
    if not sequence and sum(w for _, w in out) <= 0:
        raise UsageError(f"{where}: ops has no weight above 0.")
    return tuple(out)


def excerpt_op(text: str) -> str:
    return text[:20]


def parse_select(value: object, where: str) -> tuple[str, float] | tuple[str, float, float]:
    """`uniform`, `sequential`, `zipf:THETA`, or `hot:SHARE:PROB`: PROB of the picks go to
    SHARE of the entries (`hot:0.2:0.8`, fio's zoned distribution, vdbench's hot band)."""
    if value in ("uniform", "sequential"):
        return (value, 0.0)
    if isinstance(value, str) and value.startswith("zipf:"):
        try:
            theta = float(value[5:])
        except ValueError:
            theta = -1.0
        if theta > 0 and math.isfinite(theta):
            return ("zipf", theta)
    if isinstance(value, str) and value.startswith("hot:"):
        try:
            share, prob = (float(x) for x in value[4:].split(":"))
        except ValueError:
            share = prob = -1.0
        if 0 < share < 1 and 0 <= prob <= 1:
            return ("hot", share, prob)
    raise UsageError(
        f"{where}: select must be 'uniform', 'sequential', 'zipf:THETA' (> 0) or "
        f"'hot:SHARE:PROB' (PROB of the picks to SHARE of the files, both 0..1, e.g. "
        f"'hot:0.2:0.8'), got {shown(value)}."
    )


def parse_filestream(table: object, index: int, sets: dict[str, FilesetSpec]) -> FileStreamSpec:
    where = f"[[filestream]] {index + 1}"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table (name, fileset, ops or sequence, threads).")
    _unknown(table, STREAM_KEYS, where)
    name = _name(table, where)
    where = f"filestream '{name}'"
    fileset = table.get("fileset")
    if fileset is None and len(sets) == 1:
        fileset = next(iter(sets))
    if fileset not in sets:
        raise UsageError(
            f"{where}: fileset must name one of the [[fileset]] tables ({', '.join(sets)}), "
            f"got {shown(fileset)}."
        )
    if ("ops" in table) == ("sequence" in table):
        raise UsageError(f"{where}: give either ops (a weighted mix) or sequence (in order).")
    sequence = "sequence" in table
    ops = parse_ops(table["sequence"] if sequence else table["ops"], where, sequence)
    threads = _int(table, "threads", where, 1, 1024, 1)
    select = parse_select(table.get("select", "uniform"), where)
    append = _file_size(table.get("append", "16k"), f"{where}: append")
    read_v = table.get("read", "whole")
    read = 0 if read_v == "whole" else _file_size(read_v, f"{where}: read")
    rate = None
    if "rate" in table:
        rate = parse_iops(table["rate"], f"{where}: rate")
    arrival = table.get("arrival", "poisson" if rate else "closed")
    if arrival not in ("closed", "poisson", "constant") or (arrival == "closed") != (rate is None):
        raise UsageError(
            f"{where}: arrival must be 'poisson' or 'constant' with a rate, 'closed' without "
            f"one, got {shown(arrival)}."
        )
    openfiles = _int(table, "openfiles", where, 1, 4096, 16)
    io_size = _file_size(table.get("io_size", "1m"), f"{where}: io_size")
    if not 512 <= io_size <= 64 << 20:
        raise UsageError(f"{where}: io_size must be 512 bytes to 64 MiB, got {io_size}.")
    seed = _int(table, "seed", where, 0, 2**62, 1 + index)
    unit = table.get("unit", "loops")
    if not isinstance(unit, str) or not NAME_RE.fullmatch(unit) or not sequence and "unit" in table:
        raise UsageError(
            f"{where}: unit names what one loop of a sequence is (e.g. 'messages'), got "
            f"{shown(unit)}."
        )
    limit = None
    if "limit" in table:
        limit = _int(table, "limit", where, 1, 2**62, 1)
    truncate = _file_size(table.get("truncate", 0), f"{where}: truncate")
    return FileStreamSpec(
        name, fileset, ops, sequence, threads, select, append, read, rate,
        arrival == "poisson", openfiles, io_size, seed, unit, limit, truncate,
    )  # fmt: skip


def parse_file_workload(doc: dict[str, Any], source: str) -> FileWorkload:
    """A workload document with [[fileset]] and [[filestream]] tables."""
    _unknown(doc, TOP_KEYS, source)
    raw_sets = doc.get("fileset")
    if not isinstance(raw_sets, list) or not raw_sets:
        raise UsageError(f"{source} has no [[fileset]] table; a file workload needs one.")
    filesets = [parse_fileset(t, k) for k, t in enumerate(raw_sets)]
    by_name: dict[str, FilesetSpec] = {}
    for f in filesets:
        if f.name in by_name:
            raise UsageError(f"{source}: two file sets are named '{f.name}'.")
        for other in by_name.values():
            a, b = f.path + "/", other.path + "/"
            if a.startswith(b) or b.startswith(a):
                raise UsageError(
                    f"{source}: file sets '{other.name}' and '{f.name}' overlap ({other.path}, "
                    f"{f.path}); give each a directory of its own."
                )
        by_name[f.name] = f
    raw_streams = doc.get("filestream")
    if not isinstance(raw_streams, list) or not raw_streams:
        raise UsageError(f"{source} has no [[filestream]] table; name the operations to run.")
    streams = [parse_filestream(t, k, by_name) for k, t in enumerate(raw_streams)]
    if len({s.name for s in streams}) != len(streams):
        raise UsageError(f"{source}: two file streams share a name; name each once.")
    if sum(s.threads for s in streams) > 1024:
        raise UsageError(f"{source}: at most 1,024 threads over all file streams.")
    name = doc.get("name", "files")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise UsageError(f"{source}: name must be letters, digits and _.:+-, got {shown(name)}.")
    duration = parse_duration(doc.get("duration", "30s"), "duration")
    interval = parse_duration(doc.get("interval", "1s"), "interval")
    if interval <= 0 or duration <= 0:
        raise UsageError("duration and interval must be > 0.")
    max_errors = doc.get("max_errors", 0)
    if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 0:
        raise UsageError(f"max_errors must be a whole number >= 0, got {shown(max_errors)}.")
    backend = doc.get("backend", "psync")
    if backend not in BACKENDS:
        raise UsageError(f"backend must be one of {', '.join(BACKENDS)}, got {shown(backend)}.")
    from tilemark.files.qos import parse_qos

    qos = parse_qos(doc.get("qos"), {s.name: s.sequence for s in streams}, OPS)
    return FileWorkload(
        name, duration, interval, max_errors, tuple(filesets), tuple(streams), backend, qos
    )
