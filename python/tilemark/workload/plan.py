"""Workload specs (TOML file or fio-like flags) -> validated Workload (compiler.py then makes
the engine plan).

A workload is a list of streams plus run-wide settings. Parsing (`parse_workload`) checks
everything that needs no knowledge of the target; `compiler.compile_plan` then checks what
depends on the inspected target (O_DIRECT alignment, region bounds) and emits the plan
documented in docs/engine-boundary.md. Both raise UsageError before any IO happens.

TOML layout:

    name = "mail"                # optional workload name
    target = "/data/tm.dat"      # run-wide keys: see RUN_KEYS
    size = "10g"
    duration = "5m"
    [defaults]                   # optional: stream keys applied to every stream
    qd = 8
    [[stream]]                   # one table per stream: see STREAM_KEYS
    name = "db"
    rw = "randrw"
    read = 60
    bs = "32k"

Several targets (targetspec.py): `target = ["/dev/loop1", "/dev/loop2"]`, or one `[[target]]`
table each (`name`, `path`, `size`). A stream goes to every target unless it names its own
(`target = "db1"` or a list); over several it spreads its IOs by `spread` (uniform or size).
A stream's `start` and `stop` (run time, warm-up included) make phases within the run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark.engine import PLAN_VERSION
from tilemark.errors import UsageError
from tilemark.options import (
    ARRIVALS,
    BACKENDS,
    MAX_COPIES,
    MAX_IO_SIZE,
    MAX_QD,
    MAX_THREADS,
    RUN_KEYS,
    RW_MODES,
    SPREADS,
    STREAM_KEYS,
    copy_names,
    option,
    parse_name,
    parse_stream_name,
    shown,
)
from tilemark.targets.spec import TargetSpec, parse_targets
from tilemark.workload.gates import check_gates, gated_until_done
from tilemark.workload.limits import check_stream_count
from tilemark.workload.pacing import check_pacing
from tilemark.workload.placement import check_placement
from tilemark.workload.plain import plain
from tilemark.workload.steadyrule import SteadyRule, parse_rules
from tilemark.workload.tomlfile import load_toml as load_toml  # re-exported: plan.load_toml

__all__ = [
    "ARRIVALS",
    "BACKENDS",
    "MAX_COPIES",
    "MAX_IO_SIZE",
    "MAX_QD",
    "MAX_THREADS",
    "PLAN_VERSION",
    "RUN_KEYS",
    "RW_MODES",
    "SPREADS",
    "STREAM_KEYS",
    "TargetSpec",
]

DEFAULT_DURATION_S = 60.0
DEFAULT_INTERVAL_S = 1.0
DEFAULT_SEED = 1  # fixed like fio's randrepeat: the same workload replays the same offsets
DEFAULT_IO_TIMEOUT_S = 30.0
DEFAULT_OPEN_LOOP_QD = 64  # an open-loop stream should rarely be capped by its own queue

TOP_LEVEL_KEYS = RUN_KEYS + ("defaults", "stream", "steadystate")


def _stream_value(table: dict[str, Any], key: str, label: str) -> Any:
    """A stream key's value, parsed by its option's parser."""
    return option("stream", key).parse(table[key], label)


def _run_value(doc: dict[str, Any], key: str, label: str) -> Any:
    """A run-wide key's value, parsed by its option's parser."""
    return option("run", key).parse(doc[key], label)


@dataclass
class StreamSpec:
    """One validated stream, in user terms (bytes, percentages, IOPS)."""

    name: str
    rw: str
    read_pct: float
    sizes: list[tuple[int, float]]
    pattern: str  # "uniform" | "sequential" | "zipf:THETA" | "hotspot:IO/REGION" | "zoned:..."
    random_pct: float
    qd: int
    arrival: str  # "closed" | "constant" | "poisson"
    rate_iops: float | None = None
    rate_bytes: float | None = None
    burst: tuple[int, float] | None = None  # (ios, delay_ms)
    sync: str = "none"  # "none" | "dsync" | "fsync:N" | "fdatasync:N"
    batch: float = 1.0  # open loop: mean IOs per batch (bursty arrivals); 1: one at a time
    batch_gap_s: float = 0.0  # mean gap between a batch's IOs; 0: a batch is due at once
    writeback: bool = False  # writes through the page cache, uncached (async writeback)
    skip: tuple[int, int] | None = None  # bytes before a sequential IO (lo, hi)
    run_length: int | None = None  # IOs per random offset (fio's randread:N)
    priority: tuple[str, int] | None = None  # IO priority (class, level)
    priority_share: tuple[float, str, int] | None = None  # (pct, class, level) of IOs
    # (op, size, pct, class, level, hint) entries: priorities by size (fio's cmdprio_bssplit)
    priority_by_size: tuple[tuple[str, int, float, str, int, int], ...] | None = None
    write_sizes: list[tuple[int, float]] | None = None  # writes' sizes when not bs's
    zones: tuple[int, int, int] | None = None  # strided zones (size, range, skip)
    offset: int = 0
    length: int | None = None  # None: to the end of the target's data area
    align: int | None = None  # None: the target's O_DIRECT alignment, at least 4096
    compress_pct: float = 0.0
    dedupe: float = 1.0  # blocks written per distinct block
    dedupe_set: float | None = None  # pool % of the region; None: ~1/64 of the copies
    dedupe_global: bool = False  # one pool shared by every stream that sets it
    seed: int | None = None  # None: derived from the run seed
    targets: list[str] | None = None  # target names; None: every target of the workload
    spread: str = "uniform"  # over several targets: "uniform" | "size"
    start_s: float | None = None  # run time of its first IO (phases); None: the run's start
    stop_s: float | None = None  # run time from which it issues none; None: the run's end
    after: list[str] | None = None  # streams that must end first; start/stop count from then
    cursors: str = "shared"  # sequential mix: "shared" | "per-op" (fio's rw)
    invalidate: str = "start"  # buffered: "pass" also drops the cache after every pass
    io_size: int | None = None  # bytes after which it issues none (times passes)
    passes: int | None = None  # passes over its region after which it issues none
    host: str | None = None  # cluster runs: the one host it runs on (None: every host)
    flow: tuple[str, int] | None = None  # (group, weight): fio's flow (workload/pacing.py)
    flow_sleep_s: float = 0.0  # a stream ahead of its group waits this long, then looks again
    on_end_stop: list[str] | None = None  # streams stopped when it ends (fio's exitall)
    on_end_only_started: bool = False  # ... only those started by then (exit_what=stonewall)
    stopped_by_others: bool = False  # set by pacing.py: another stream's end surely stops it
    # Which keys came from CLI flags, so messages can say "--qd" instead of "qd".
    flag_keys: frozenset[str] = field(default=frozenset(), repr=False)

    def writes(self) -> bool:
        """True if this stream issues any writes."""
        return self.read_pct < 100.0

    def ends_by_itself(self) -> bool:
        """True when the stream stops: a byte limit, passes, a stop time, or the end of a
        stream that stops it (pacing.py)."""
        return (
            self.io_size is not None
            or self.passes is not None
            or self.stop_s is not None
            or self.stopped_by_others
        )

    def label(self, key: str) -> str:
        """How to name a field of this stream in a message."""
        if key in self.flag_keys:
            return "--" + key.replace("_", "-")
        return f"stream '{self.name}': {key}"

    def key(self, key: str) -> str:
        """A field as the user would spell it: --rate-bytes on the command line, else rate_bytes."""
        return "--" + key.replace("_", "-") if self.flag_keys else key


@dataclass
class Workload:
    """A validated workload: run-wide settings, its targets (a named list) and its streams."""

    name: str
    source: str  # "flags", "default" or the TOML file path
    targets: list[TargetSpec]
    duration_s: float | None  # None: until every stream is done (io_size, passes or stop)
    warmup_s: float
    interval_s: float
    backend: str
    threads: int | None
    direct: bool
    seed: int
    streams: list[StreamSpec]
    poll_us: int = 0  # uring: spin this long for completions before sleeping (0: adaptive)
    cpus: tuple[int, ...] = ()  # engine thread i runs on cpus[i % len]; (): the kernel decides
    sqpoll: bool = False  # uring: a kernel thread polls each ring's submission queue
    max_errors: int | None = 0  # stop once more IOs failed; None: never
    io_timeout_s: float = DEFAULT_IO_TIMEOUT_S  # an IO outstanding longer is hung; 0: never
    keep_cache: bool = False  # buffered IO: keep the target's cached pages at the start
    fadvise: str = "none"  # buffered IO: "pattern" advises each target's pattern (fio's hint)
    verify: bool = False  # verifiable blocks, reads checked (docs/verification.md)
    steadystate: SteadyRule | None = None  # [steadystate]: ends on fio's criterion
    # [[steadystate]] rules that each end their streams, not the run (fio's reporting groups)
    stream_rules: tuple[SteadyRule, ...] = ()

    def writes(self) -> bool:
        """True if any stream writes (the target's safety rules depend on it)."""
        return any(stream.writes() for stream in self.streams)

    def stream_targets(self, stream: StreamSpec) -> list[int]:
        """Indices (in `targets`) of the targets a stream goes to."""
        if stream.targets is None:
            return list(range(len(self.targets)))
        names = [t.name for t in self.targets]
        return [names.index(n) for n in stream.targets]

    def writes_to(self, index: int) -> bool:
        """True if a stream writes to target `index` (its safety rules depend on it)."""
        return any(s.writes() and index in self.stream_targets(s) for s in self.streams)

    def to_json(self) -> dict[str, Any]:
        """The user-facing spec as plain JSON-able data (recorded with the run)."""
        spec = plain(self)
        for stream in spec["streams"]:
            stream.pop("flag_keys")
            stream["sizes"] = [[size, weight] for size, weight in stream["sizes"]]
            if stream["burst"] is not None:
                ios, delay_ms = stream["burst"]
                stream["burst"] = {"ios": ios, "delay_ms": delay_ms}
        return spec


def _check_keys(table: object, allowed: tuple[str, ...], where: str) -> dict[str, Any]:
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table of keys, got {shown(table)}.")
    for key in table:
        if key not in allowed:
            raise UsageError(
                f"{where}: unknown key '{key}'; allowed keys are {', '.join(allowed)}."
            )
    return table


def _default_base(table: dict[str, Any]) -> str:
    rw = table.get("rw")
    if isinstance(rw, str) and rw.strip().lower() in RW_MODES:
        return rw.strip().lower()
    if rw is None:
        return "randrw" if "read" in table else "randread"
    return "stream"  # an invalid rw is reported by parse_stream


def _stream_names(tables: list[dict[str, Any]], flag_keys: frozenset[str]) -> list[str]:
    """Stream names: the given ones, else the rw mode (plus the index when it repeats)."""
    given: list[str | None] = []
    for index, table in enumerate(tables):
        name = table.get("name")
        if name is not None:
            label = "--name" if "name" in flag_keys else f"stream {index + 1}: name"
            parse_stream_name(name, label)
        if name is not None and name in given:
            raise UsageError(f"stream names must be unique; '{name}' is used twice.")
        given.append(name)
    unnamed_bases = [_default_base(t) for t, name in zip(tables, given, strict=True) if not name]
    names = []
    for index, (table, name) in enumerate(zip(tables, given, strict=True)):
        if name is None:
            base = _default_base(table)
            clash = unnamed_bases.count(base) > 1 or base in given
            name = f"{base}.{index}" if clash else base
        names.append(name)
    return names


def _copies_label(name: str, flag_keys: frozenset[str]) -> str:
    return "--copies" if "copies" in flag_keys else f"stream '{name}': copies"


def _expand_copies(
    tables: list[dict[str, Any]], names: list[str], flag_keys: frozenset[str], source: str
) -> tuple[list[dict[str, Any]], list[str]]:
    """`copies = N` turns a stream into N identical streams NAME@0..NAME@{N-1} (Iometer's
    workers), each with its own seed (an explicit seed is offset by the copy's index). "@" is
    no name character, so copy names never collide with each other or with named streams."""
    out_tables: list[dict[str, Any]] = []
    out_names: list[str] = []
    counts = [
        _stream_value(table, "copies", _copies_label(name, flag_keys)) if "copies" in table else 1
        for table, name in zip(tables, names, strict=True)
    ]
    check_stream_count(sum(counts), source)
    for table, name in zip(tables, names, strict=True):
        if "copies" not in table:
            out_tables.append(table)
            out_names.append(name)
            continue
        copies = _stream_value(table, "copies", _copies_label(name, flag_keys))
        base = {k: v for k, v in table.items() if k != "copies"}
        for i, copy_name in enumerate(copy_names(name, copies)):
            copy = dict(base)
            if "seed" in base:
                seed = _stream_value(base, "seed", f"stream '{name}': seed")
                copy["seed"] = (seed + i) % (1 << 63)
            out_tables.append(copy)
            out_names.append(copy_name)
    if len(set(out_names)) != len(out_names):  # a stream named like a copy (NAME@N) met one
        seen: set[str] = set()
        dup = next(n for n in out_names if n in seen or seen.add(n))
        raise UsageError(
            f"stream names must be unique; '{dup}' is used twice (copies: NAME@0, ...)."
        )
    return out_tables, out_names


def parse_stream(table: dict[str, Any], name: str, flag_keys: frozenset[str]) -> StreamSpec:
    stream = StreamSpec(
        name=name,
        rw="randread",
        read_pct=100.0,
        sizes=[(4096, 1.0)],
        pattern="uniform",
        random_pct=100.0,
        qd=1,
        arrival="closed",
        flag_keys=flag_keys,
    )
    label = stream.label

    def value(key: str) -> Any:
        return _stream_value(table, key, label(key))

    if "rw" in table:
        stream.rw = value("rw")
    elif "read" in table:
        stream.rw = "randrw"
    fixed_read, random_by_default = RW_MODES[stream.rw]
    if "read" in table:
        read_pct = value("read")
        if fixed_read is not None and read_pct != fixed_read:
            raise UsageError(
                f"{label('read')} is {read_pct:g} but rw {stream.rw} means {fixed_read:g}% reads; "
                f"use {stream.key('rw')} rw, readwrite or randrw for a mix."
            )
        stream.read_pct = read_pct
    else:
        stream.read_pct = fixed_read if fixed_read is not None else 50.0

    if "bs" in table:
        stream.sizes = value("bs")

    stream.random_pct = 100.0 if random_by_default else 0.0
    if "random" in table:
        stream.random_pct = value("random")
    if "pattern" in table:
        stream.pattern = value("pattern")
        if stream.pattern == "sequential":
            if random_by_default or stream.random_pct > 0:
                raise UsageError(
                    f"{label('pattern')} sequential conflicts with rw {stream.rw} and random "
                    f"{stream.random_pct:g}%; use rw read, write or rw for sequential IO."
                )
        elif stream.random_pct == 0:
            raise UsageError(
                f"{label('pattern')} {stream.pattern} places random IOs, but rw {stream.rw} with "
                f"random {stream.random_pct:g}% has none; use a rand* rw or set random above 0."
            )

    rate_given = "rate" in table or "rate_bytes" in table
    if "rate" in table and "rate_bytes" in table:
        raise UsageError(
            f"{label('rate')} and {stream.key('rate_bytes')} cannot both be set; give one rate."
        )
    if "rate" in table:
        stream.rate_iops = value("rate")
    if "rate_bytes" in table:
        stream.rate_bytes = value("rate_bytes")
    if "arrival" in table:
        stream.arrival = value("arrival")
        if stream.arrival == "closed" and rate_given:
            raise UsageError(
                f"{label('arrival')} closed keeps the queue full and ignores a rate; "
                f"use constant or poisson with a rate, or drop the rate."
            )
        if stream.arrival != "closed" and not rate_given:
            raise UsageError(
                f"{label('arrival')} {stream.arrival} is an open loop and needs "
                f"{stream.key('rate')} (IOPS) or {stream.key('rate_bytes')}."
            )
    elif rate_given:
        stream.arrival = "constant"

    open_loop = stream.arrival != "closed"
    stream.qd = DEFAULT_OPEN_LOOP_QD if open_loop else 1
    if "batch" in table and not open_loop:
        raise UsageError(
            f"{label('batch')} shapes open-loop arrivals; give the stream a rate (closed loop "
            "keeps its queue full)."
        )
    for key, attr in (
        ("qd", "qd"),
        ("burst", "burst"),
        ("sync", "sync"),
        ("batch", "batch"),
        ("batch_gap", "batch_gap_s"),
        ("writeback", "writeback"),
        ("skip", "skip"),
        ("run_length", "run_length"),
        ("priority", "priority"),
        ("priority_share", "priority_share"),
        ("priority_by_size", "priority_by_size"),
        ("write_bs", "write_sizes"),
        ("zones", "zones"),
        ("offset", "offset"),
        ("length", "length"),
        ("align", "align"),
        ("compress", "compress_pct"),
        ("dedupe", "dedupe"),
        ("dedupe_set", "dedupe_set"),
        ("dedupe_global", "dedupe_global"),
        ("seed", "seed"),
        ("target", "targets"),
        ("spread", "spread"),
        ("start", "start_s"),
        ("stop", "stop_s"),
        ("after", "after"),
        ("cursors", "cursors"),
        ("invalidate", "invalidate"),
        ("io_size", "io_size"),
        ("passes", "passes"),
        ("host", "host"),
        ("flow", "flow"),
        ("flow_sleep", "flow_sleep_s"),
        ("on_end_stop", "on_end_stop"),
        ("on_end_only_started", "on_end_only_started"),
    ):
        if key in table:
            setattr(stream, attr, value(key))
    check_placement(stream)
    return stream


def _check_stream_targets(stream: StreamSpec, targets: list[TargetSpec]) -> None:
    """A stream names only targets of the workload."""
    names = [t.name for t in targets]
    for name in stream.targets or []:
        if name not in names:
            raise UsageError(
                f"{stream.label('target')} '{name}' is not a target of the workload; its "
                f"targets are {', '.join(names)}."
            )


def _check_phase(
    stream: StreamSpec, warmup_s: float, duration_s: float | None, dur_key: str
) -> None:
    """start before stop, both within the run (warm-up + duration)."""
    start, stop = stream.start_s, stream.stop_s
    if start is not None and stop is not None and start >= stop:
        raise UsageError(
            f"{stream.label('start')} {start:g} s is not before {stream.key('stop')} {stop:g} s; "
            "a stream issues IO from start until stop (run time)."
        )
    if duration_s is None or stream.after:
        return  # the run lasts until every stream is done; a gated stream's phase is relative
    end = warmup_s + duration_s
    run = f"{end:g} s" + (f" ({warmup_s:g} s warm-up + {duration_s:g} s)" if warmup_s else "")
    if start is not None and start >= end:
        raise UsageError(
            f"{stream.label('start')} {start:g} s is not within the run of {run}; start it "
            f"earlier or raise {dur_key}."
        )
    if stop is not None and stop > end + 1e-9:
        raise UsageError(
            f"{stream.label('stop')} {stop:g} s is past the end of the run at {run}; stop it "
            f"earlier or raise {dur_key}."
        )


def _until_done(streams: list[StreamSpec]) -> bool:
    """A workload without a duration runs until every stream is done when they all end by
    themselves and at least one by its bytes (a run of stop times alone keeps the default)."""
    return all(s.ends_by_itself() for s in streams) and any(
        s.io_size is not None or s.passes is not None for s in streams
    )


def clock_workload(
    name: str, source: str, *, duration_s: float, warmup_s: float, interval_s: float
) -> Workload:
    """A workload of no streams on no targets: the engine only keeps time (the warm-up, the
    intervals, the end, a stop) for a run whose IO is elsewhere, a tile of file applications
    only (run/tiles.py), so it is timed, monitored, stopped and stored as every run is."""
    return Workload(
        name=name,
        source=source,
        targets=[],
        duration_s=duration_s,
        warmup_s=warmup_s,
        interval_s=interval_s,
        backend="null",
        threads=1,
        direct=False,
        seed=DEFAULT_SEED,
        streams=[],
    )


def parse_workload(
    doc: dict[str, Any],
    *,
    source: str,
    flag_keys: frozenset[str] = frozenset(),
) -> Workload:
    """Validate a workload document (TOML layout) into a Workload; raises UsageError.

    `flag_keys` lists keys that came from CLI flags (run-wide and stream keys alike), so their
    messages name the flag.
    """

    def run_label(key: str) -> str:
        return "--" + key.replace("_", "-") if key in flag_keys else key

    def run_value(key: str, default: Any) -> Any:
        return _run_value(doc, key, run_label(key)) if key in doc else default

    _check_keys(doc, TOP_LEVEL_KEYS, "workload" if source == "flags" else source)
    defaults = _check_keys(doc.get("defaults", {}), STREAM_KEYS, "[defaults]")
    if "name" in defaults:
        raise UsageError("[defaults]: name is per stream; set it in each [[stream]] table.")
    tables = doc.get("stream")
    if not isinstance(tables, list) or not tables:
        raise UsageError(
            f'{source} has no streams; add at least one [[stream]] table (e.g. rw = "randread").'
        )
    what = "the workload" if source in ("flags", "default") or ":" in source else source
    check_stream_count(len(tables), what)
    for index, table in enumerate(tables):
        named = isinstance(table, dict) and isinstance(table.get("name"), str)
        _check_keys(
            table, STREAM_KEYS, f"stream '{table['name']}'" if named else f"stream {index + 1}"
        )

    if doc.get("target") is None:
        raise UsageError(
            "target is required: pass --target PATH (a file, created if missing, or a block "
            "device) or set target in the workload file."
        )
    size = run_value("size", None)
    target_list = parse_targets(doc["target"], size, flag="target" in flag_keys)
    warmup_s = run_value("warmup", 0.0)
    interval_s = run_value("interval", DEFAULT_INTERVAL_S)
    backend = run_value("backend", "uring")
    threads = run_value("threads", None)
    direct = run_value("direct", True)
    seed = run_value("seed", DEFAULT_SEED)
    max_errors = run_value("max_errors", 0)
    io_timeout_s = run_value("io_timeout", DEFAULT_IO_TIMEOUT_S)
    if "name" in doc:
        name = parse_name(doc["name"], "name")
    else:
        # From the file name, which may hold characters a name may not (my db.toml -> my_db).
        stem = Path(source).stem if source not in ("flags", "default") else source
        name = re.sub(r"[^A-Za-z0-9_.:+-]", "_", stem)[:64] or "workload"

    merged = [{**defaults, **table} for table in tables]
    names = _stream_names(merged, flag_keys)
    merged, names = _expand_copies(merged, names, flag_keys, what)
    streams = [
        parse_stream(table, stream_name, flag_keys & set(table))
        for table, stream_name in zip(merged, names, strict=True)
    ]
    check_pacing(streams)
    rules = parse_rules(doc.get("steadystate"), [s.name for s in streams], interval_s)
    duration_s = run_value("duration", DEFAULT_DURATION_S)
    if "duration" not in doc and (_until_done(streams) or gated_until_done(streams, rules)):
        duration_s = None
    for stream in streams:
        _check_stream_targets(stream, target_list)
        _check_phase(stream, warmup_s, duration_s, run_label("duration"))
    check_gates(streams, rules)
    return Workload(
        name=name,
        source=source,
        targets=target_list,
        duration_s=duration_s,
        warmup_s=warmup_s,
        interval_s=interval_s,
        backend=backend,
        threads=threads,
        direct=direct,
        seed=seed,
        streams=streams,
        poll_us=run_value("poll_us", 0),
        cpus=run_value("cpus", ()),
        sqpoll=run_value("sqpoll", False),
        max_errors=None if max_errors < 0 else max_errors,
        io_timeout_s=io_timeout_s,
        keep_cache=run_value("keep_cache", False),
        fadvise=run_value("fadvise", "none"),
        verify=run_value("verify", False),
        steadystate=next((r for r in rules if r.ends == "run"), None),
        stream_rules=tuple(r for r in rules if r.ends == "streams"),
    )
