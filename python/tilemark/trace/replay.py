"""`tilemark replay`: block traces replayed against a target, as a run like any other
(docs/replay.md): intervals, histograms, telemetry, summary, catalog and report, plus
how faithfully the replay kept to the trace (trace/accuracy.py). This module compiles a replay;
commands/replay.py runs it.

Every trace (or every group of a trace's rows, `split`) is one stream of the run, replaying an
IO list the engine reads in chunks (trace/iolist.py writes it; crates/engine/src/replay.rs
reads it). Everything the user gave is checked before any IO and before anything is written:
the traces are scanned, the target inspected, the lists written to a staging directory in the
results directory (removed again when anything is refused); they move into the run directory
when the run starts.

Where IOs land (`remap`): `off` keeps the traced offsets (a trace reaching past the target's
data area is refused); `modulo` wraps them into the stream's region; `scale` maps the traced
device's size (the trace's own extent when unknown) onto the region. With modulo and scale
every trace gets its own region, an equal share of the data area; the streams of one trace
(`split`) share their trace's region, being processes of one application on one device. With
`off` every trace's region is the whole data area, so traces of different devices overlap
where their offsets do. Offsets and sizes are rounded out to the target's O_DIRECT alignment
(an IO that does not meet it covers the aligned blocks around it), and counted.
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tilemark import targets as tgt
from tilemark.errors import UsageError
from tilemark.options import MAX_QD
from tilemark.run.outcome import RunOutcome
from tilemark.targets.sets import inspect_targets
from tilemark.targets.spec import TargetSpec, default_name
from tilemark.trace import accuracy, iolist
from tilemark.trace.iolist import ListPlan, Remap, TraceScan
from tilemark.trace.schema import open_trace
from tilemark.trace.selection import Selection
from tilemark.units import MIB, format_size
from tilemark.workload import compiler
from tilemark.workload import plan as planning

MODES = ("timed", "afap", "qd")
TIMES = ("queue", "issue")
# --keep-gaps: IOs recorded within 1 us of each other were dispatched together by the traced
# kernel (one plug, one batch); further apart, they go in submissions of their own.
GAP_SPLIT_NS = 1000
REMAPS = ("modulo", "scale", "off")
WRITES = ("traced", "direct")
# Trace sources that record each request's sync flag (the kernel's REQ_SYNC): a capture, and
# blkparse's RWBS field (its S). Other formats say nothing of it, so their writes go direct.
SYNC_SOURCES = ("capture", "import:blkparse")
MIN_CAP = 256  # IOs in flight per stream at most (timed, afap): at least this many, ...
CAP_BUFFER_BYTES = 64 << 20  # ... up to as many as this much of buffers holds (MAX_QD at most)
MAX_SPEED = 1e6
LIST_DIR = "replay"  # the IO lists' directory in the run directory


@dataclass(frozen=True)
class ReplayOptions:
    """What `tilemark replay` was asked (every field checked by the parsers below)."""

    traces: tuple[Path, ...]
    target: str
    size: int | None = None
    speed: float = 1.0
    mode: str = "timed"
    # What a timed replay's IOs are due at: "issue", their issue times, or "queue", the rows'
    # queue times where the trace has them, else their issue times (docs/replay.md: issue is
    # the default because the wait between the two was measured to be mostly the traced
    # kernel's throttling of page-cache writeback, which an O_DIRECT replay does not undergo).
    times: str = "issue"
    # Timed: also hold each IO until as many of its stream's IOs completed as had when it was
    # recorded (afap's dependencies), so a target slower than the recording gets fewer IOs in
    # flight, as the application would have given it, not a growing queue.
    deps: bool = False
    # Timed: IOs recorded more than GAP_SPLIT_NS apart never go to the device in one
    # submission (when the replay runs late, due IOs would otherwise leave back to back).
    keep_gaps: bool = False
    # traced: writes the trace recorded without the sync flag (page-cache writeback) go through
    # the page cache uncached, so they reach the device as writeback does (no sync flag, the
    # kernel's writeback throttling); sync writes go direct. direct: every write O_DIRECT.
    # Only for traces whose source records the flag (SYNC_SOURCES); others go direct.
    writes: str = "traced"
    depth: int | None = None  # qd:N; for timed and afap the cap on IOs in flight
    remap: str = "modulo"
    select: Selection = field(default_factory=Selection)
    split: str | None = None
    loop: bool = False
    duration_s: float | None = None
    backend: str = "uring"
    threads: int | None = None
    direct: bool = True
    interval_s: float = 1.0
    results: Path = Path("tilemark-results")
    destroy_data: tuple[str, ...] = ()
    force: bool = False
    label: str | None = None


def parse_mode(text: str) -> tuple[str, int | None]:
    """timed | afap | qd:N -> (mode, depth)."""
    value = text.strip().lower()
    if value in ("timed", "afap"):
        return value, None
    match = re.fullmatch(r"qd:(\d+)", value)
    if match and 1 <= int(match.group(1)) <= MAX_QD:
        return "qd", int(match.group(1))
    raise UsageError(f"--mode must be timed, afap or qd:N (N from 1 to {MAX_QD}), got {text!r}.")


def parse_speed(text: str) -> float:
    """A speed factor above 0 (2 = twice as fast)."""
    try:
        speed = float(text)
    except ValueError:
        speed = -1.0
    if not (0 < speed <= MAX_SPEED):
        raise UsageError(f"--speed must be a number above 0 (2 = twice as fast), got {text!r}.")
    return speed


def parse_choice(text: str, flag: str, choices: tuple[str, ...]) -> str:
    value = text.strip().lower()
    if value not in choices:
        raise UsageError(f"{flag} must be one of {', '.join(choices)}, got {text!r}.")
    return value


def inflight_cap(max_len: int, trace_inflight: int) -> int:
    """How many IOs a timed or afap stream may have in flight: enough that a burst the device
    cannot absorb at once queues at the device (where its response time shows it) rather
    than in tilemark (where its IOs would go out late), as long as the buffers stay within
    CAP_BUFFER_BYTES; at least MIN_CAP and twice the trace's own concurrency, at most MAX_QD.
    On a device throttled to 5,000 IOPS, bursts of 3,000 IOs at 20,000 IOPS went out up to
    0.3 s late with 256 slots (bench/results/LOG.md, Trace replay)."""
    by_memory = CAP_BUFFER_BYTES // max(1, max_len)
    return min(MAX_QD, max(MIN_CAP, 2 * trace_inflight, by_memory))


@dataclass(frozen=True)
class ReplayStream:
    """One stream of the replay as compiled: its rows, its region, its list."""

    name: str
    scan: TraceScan
    key: Any  # the split value, or None
    region_offset: int
    remap: Remap
    written: iolist.StreamList
    expectation: accuracy.StreamExpectation
    qd: int
    loop_ns: int | None


@dataclass(frozen=True)
class CompiledReplay:
    """A replay checked and compiled, its lists in `staging`, nothing run yet."""

    options: ReplayOptions
    streams: tuple[ReplayStream, ...]
    infos: list[tgt.TargetInfo]
    workload: planning.Workload
    plan: dict[str, Any]
    staging: Path
    align: int


@dataclass(frozen=True)
class ReplayResult:
    """A stored replay: the run, and the summary's `replay` section."""

    outcome: RunOutcome
    replay: dict[str, Any]

    @property
    def exit_status(self) -> int:
        return self.outcome.exit_status or 0


def compile_replay(options: ReplayOptions, staging: Path) -> CompiledReplay:
    """Scan the traces, inspect the target, lay the streams out and write their lists into
    `staging` (created here, in the results directory); UsageError on anything refused."""
    _check_options(options)
    scans = [
        iolist.scan(open_trace(path), options.select, options.split, completions=True)
        for path in options.traces
    ]
    if options.mode == "afap" or options.deps:
        what = "--mode afap" if options.mode == "afap" else "--deps"
        for s in scans:
            if not all(g.completions for g in s.groups.values()):
                raise UsageError(
                    f"{what} needs completion times, and trace {s.path} lacks some "
                    "(complete_ns or latency_ns); replay it timed or with --mode qd:N."
                )
    writes = any(g.ops["write"] or g.ops["discard"] for s in scans for g in s.groups.values())
    spec = TargetSpec(default_name(options.target), options.target, _target_size(options, scans))
    infos = inspect_targets(
        [spec],
        writes=[writes],
        direct=options.direct,
        destroy_data=list(options.destroy_data),
        force=options.force,
    )
    info = infos[0]
    align = _alignment(options, info)
    if any(g.ops["discard"] for s in scans for g in s.groups.values()):
        _check_discard(info, options.backend)
    layout = _layout(options, scans, info, align)
    staging.mkdir(parents=True)
    streams = _write(options, scans, layout, align, staging, block=info.kind == "block")
    workload = _workload(options, spec, streams, align)
    plan = compiler.compile_plan(workload, infos)
    _finish_plan(options, plan, streams)
    return CompiledReplay(options, tuple(streams), infos, workload, plan, staging, align)


def _check_options(o: ReplayOptions) -> None:
    if not o.traces:
        raise UsageError("name at least one trace to replay (TRACE.parquet).")
    if o.loop and o.duration_s is None:
        raise UsageError("--loop repeats the trace until --duration; give --duration T.")
    if o.split is not None and o.split not in iolist.SPLITS:
        raise UsageError(f"--split must be one of {', '.join(iolist.SPLITS)}, got {o.split!r}.")
    if o.depth is not None and o.mode != "qd":
        raise UsageError(f"--mode {o.mode} takes no depth; qd:N sets one.")
    if o.keep_gaps and o.mode != "timed":
        raise UsageError(f"--keep-gaps applies to --mode timed, not {o.mode}.")
    if o.deps and o.mode != "timed":
        raise UsageError(
            f"--deps applies to --mode timed (afap always waits, qd never), not {o.mode}."
        )


def _target_size(o: ReplayOptions, scans: list[TraceScan]) -> int | None:
    """--size; for a new file replayed with --remap off, large enough for every trace."""
    if o.size is not None or o.remap != "off" or os.path.exists(o.target):
        return o.size
    extent = max(s.max_end for s in scans)
    return max(MIB, -(-extent // MIB) * MIB)


def _alignment(o: ReplayOptions, info: tgt.TargetInfo) -> int:
    """The alignment IOs are rounded out to: the O_DIRECT alignment, 1 when buffered."""
    if not o.direct:
        return 1
    if info.dio_alignment == 0:
        raise UsageError(
            f"target {info.path} does not support O_DIRECT (tmpfs and some network "
            "filesystems do not); replay with --buffered."
        )
    return info.dio_alignment


def _check_discard(info: tgt.TargetInfo, backend: str) -> None:
    """The trace discards: the target must be able to (a missing kernel facility is refused
    before the run, not found out by its first discard)."""
    if backend == "null":
        return
    if info.kind == "block":
        rdev = os.stat(info.path).st_rdev
        queue = Path(f"/sys/dev/block/{os.major(rdev)}:{os.minor(rdev)}/queue")
        try:
            supported = int((queue / "discard_max_bytes").read_text()) > 0
        except (OSError, ValueError):
            supported = False
        if not supported:
            raise UsageError(
                f"the trace discards, and target {info.path} does not support discard "
                f"({queue}/discard_max_bytes is 0); select other ops with --select op=.."
            )
        release = os.uname().release.split(".")
        if backend == "uring" and tuple(int(x) for x in release[:2] if x.isdigit()) < (6, 12):
            raise UsageError(
                f"the trace discards, and io_uring discards block devices from Linux 6.12 on "
                f"(this kernel is {os.uname().release}); replay with --backend psync."
            )
        return
    reason = _punch_hole_refused(info.path)
    if reason is not None:
        raise UsageError(
            f"the trace discards, and the filesystem of {info.path} cannot punch holes "
            f"({reason}); replay it on ext4, xfs, btrfs or tmpfs, or --select other ops."
        )


def _punch_hole_refused(path: str) -> str | None:
    """Why fallocate(PUNCH_HOLE) fails where `path` is, or None: probed past the end of an
    existing file (which changes nothing), or on an unnamed temporary file beside a new one."""
    libc = ctypes.CDLL(None, use_errno=True)
    mode = 0x01 | 0x02  # FALLOC_FL_KEEP_SIZE | FALLOC_FL_PUNCH_HOLE
    try:
        if os.path.exists(path):
            fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
            at = os.fstat(fd).st_size
        else:
            fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_TMPFILE | os.O_WRONLY)
            at = 0
    except OSError:
        return None  # not probed: the run's first discard will say
    try:
        rc = libc.fallocate(fd, mode, ctypes.c_long(at), ctypes.c_long(4096))
        err = ctypes.get_errno()
    finally:
        os.close(fd)
    if rc == 0 or err not in (errno.EOPNOTSUPP, errno.ENOSYS):
        return None
    return os.strerror(err)


@dataclass(frozen=True)
class _Region:
    offset: int
    remap: Remap


def _layout(
    o: ReplayOptions, scans: list[TraceScan], info: tgt.TargetInfo, align: int
) -> list[_Region]:
    """Each trace's region of the data area and how its offsets map into it."""
    area = info.data_length // align * align
    unit = MIB if area // len(scans) >= MIB else align
    share = area if o.remap == "off" else area // len(scans) // unit * unit
    regions = []
    for k, s in enumerate(scans):
        extent = -(-s.max_end // align) * align
        biggest = -(-s.max_size // align) * align + (align if align > 1 else 0)
        if o.remap == "off" and extent > area:
            raise UsageError(
                f"trace {s.path} reaches byte {s.max_end:,}, beyond the data area of target "
                f"{info.path} ({format_size(area)}); replay with --remap modulo or scale, or give "
                "a larger --size."
            )
        if biggest > share:
            raise UsageError(
                f"trace {s.path} has IOs of {format_size(s.max_size)}, larger than its region "
                f"of {format_size(share)} on target {info.path}; give a larger --size."
            )
        device = s.trace.meta.device_size or 0
        remap = Remap(o.remap, share, align, extent=max(extent, device, align))
        regions.append(_Region(0 if o.remap == "off" else k * share, remap))
    return regions


def _stream_name(scan: TraceScan, split: str | None, key: Any, taken: set[str]) -> str:
    base = re.sub(r"[^A-Za-z0-9_.:+-]", "_", scan.path.stem)[:40] or "trace"
    if split is not None:
        value = "unknown" if key is None else str(key)
        base += "." + re.sub(r"[^A-Za-z0-9_.:+-]", "_", f"{split}{value}")[:22]
    name, n = base, 1
    while name in taken:
        name, n = f"{base}.{n}", n + 1
    taken.add(name)
    return name


def _write(
    o: ReplayOptions,
    scans: list[TraceScan],
    layout: list[_Region],
    align: int,
    staging: Path,
    *,
    block: bool,
) -> list[ReplayStream]:
    """Write every stream's IO list into `staging` (`block`: the target is a block device)."""
    streams: list[ReplayStream] = []
    taken: set[str] = set()
    cut_ns = None if o.duration_s is None else round(o.duration_s * 1e9)
    for scan_, region in zip(scans, layout, strict=True):
        # One pass of a looping trace lasts its span plus one mean gap, so the next pass's
        # first IO keeps the rhythm (a 250 IOPS trace of 1,000 IOs loops every 4 s).
        span = scan_.span_ns / o.speed
        gap = span / max(1, scan_.selected - 1)
        loop_ns = max(1, round(span + gap)) if o.loop else None
        plans, groups = [], []
        writeback = writes_traced(o, scan_, block)
        for key, group in scan_.groups.items():
            name = _stream_name(scan_, o.split, key, taken)
            path = staging / f"{len(streams) + len(plans)}.ios"
            timed_cut = cut_ns if (o.mode == "timed" and not o.loop) else None
            remainder = cut_ns % loop_ns if (cut_ns is not None and loop_ns) else None
            deps = o.mode == "afap" or o.deps
            plans.append(ListPlan(key, path, region.remap, deps, timed_cut, remainder, writeback))
            groups.append((name, group))
        by_queue = o.mode == "timed" and o.times == "queue"
        written = iolist.write_lists(scan_, o.select, o.split, o.speed, plans, by_queue=by_queue)
        for (name, group), out in zip(groups, written, strict=True):
            if out.records == 0:
                raise UsageError(
                    f"--duration {o.duration_s:g} s leaves stream {name} of trace {scan_.path} "
                    "no IO to replay (its first IO comes later); give a longer --duration."
                )
            streams.append(_stream(o, scan_, name, group, region, out, loop_ns, cut_ns))
    return streams


def writes_traced(o: ReplayOptions, scan_: TraceScan, block: bool) -> bool:
    """Does this trace's page-cache writeback replay as such (ReplayOptions.writes)? Not on a
    block device: its page cache writes back a 4 KiB buffer per request (buffer heads), so
    the device would see the writes cut up; measured on PostgreSQL's trace (docs/replay.md),
    that cost the request sizes more than the sync flag gained."""
    return o.writes == "traced" and not block and scan_.trace.meta.source in SYNC_SOURCES


def _stream(
    o: ReplayOptions,
    scan_: TraceScan,
    name: str,
    group: iolist.GroupScan,
    region: _Region,
    out: iolist.StreamList,
    loop_ns: int | None,
    cut_ns: int | None,
) -> ReplayStream:
    span_ns = (group.last_ns - (group.first_ns or 0)) / o.speed
    rate = (group.rows - 1) / (span_ns / 1e9) if group.rows > 1 and span_ns > 0 else 0.0
    expected: int | None = out.records
    if loop_ns is not None and cut_ns is not None:
        expected = (cut_ns // loop_ns) * out.records + out.before_cut
    if o.mode != "timed" and o.duration_s is not None:
        expected = None  # afap and qd: --duration cuts the run wherever it has got to
    qd = (o.depth or 1) if o.mode == "qd" else inflight_cap(out.max_len, group.max_inflight)
    expectation = accuracy.StreamExpectation(
        name=name,
        trace=str(scan_.path.resolve()),
        group=None if o.split is None else f"{o.split} {group.key}",
        records=out.records,
        expected=expected,
        ops=dict(out.ops),
        rounded=out.rounded,
        trace_iops=rate,
        trace_span_s=span_ns / 1e9,
        mode=o.mode,
    )
    return ReplayStream(
        name, scan_, group.key, region.offset, region.remap, out, expectation, qd, loop_ns
    )


def _workload(
    o: ReplayOptions, spec: TargetSpec, streams: list[ReplayStream], align: int
) -> planning.Workload:
    """The replay as a workload: one stream per list, over its region."""
    specs = []
    for s in streams:
        ops = s.written.ops
        moved = ops["read"] + ops["write"] + ops["discard"]
        read_pct = 100.0 * ops["read"] / moved if moved else 100.0
        # The rate results compare IOPS with: reads and writes (flushes and discards are not
        # counted as IOPS); the replay section compares every record.
        data_share = (ops["read"] + ops["write"]) / max(1, s.written.records)
        rate = max(s.expectation.trace_iops * data_share, 1e-3)
        specs.append(
            planning.StreamSpec(
                name=s.name,
                rw="randrw",
                read_pct=read_pct,
                sizes=[(int(a), b) for a, b in iolist.size_mix(s.written.sizes)],
                pattern="uniform",
                random_pct=100.0,
                qd=s.qd,
                arrival="constant" if o.mode == "timed" else "closed",
                rate_iops=rate if o.mode == "timed" else None,
                offset=s.region_offset,
                length=s.remap.region,
                align=align,
                seed=1,
            )
        )
    duration = o.duration_s or max(1.0, max(s.expectation.trace_span_s for s in streams))
    return planning.Workload(
        name="replay",
        source=",".join(str(p) for p in o.traces),
        targets=[spec],
        duration_s=duration,
        warmup_s=0.0,
        interval_s=o.interval_s,
        backend=o.backend,
        threads=o.threads,
        direct=o.direct,
        seed=1,
        streams=specs,
    )


def _finish_plan(o: ReplayOptions, plan: dict[str, Any], streams: list[ReplayStream]) -> None:
    """The compiled plan's replay parts: each stream's list, and when the run ends (timed: when
    its lists are done; afap and qd: at --duration, if given)."""
    cut_ms = None if o.duration_s is None else round(o.duration_s * 1000)
    plan["duration_ms"] = cut_ms if o.mode != "timed" else None
    for stream, s in zip(plan["streams"], streams, strict=True):
        stream["ios"] = {  # type: ignore[typeddict-unknown-key]
            "path": str(s.written.path),
            "count": s.written.records,
            "mode": o.mode,
            "loop_ns": s.loop_ns,
            "deps": o.deps,
            "split_ns": GAP_SPLIT_NS if (o.keep_gaps and o.mode == "timed") else 0,
        }
        stream["stop_ms"] = cut_ms if (o.mode == "timed" and o.loop) else None


def move_lists(compiled: CompiledReplay, run_dir: Path, plan: dict[str, Any]) -> None:
    """The run starts: its IO lists move into the run directory, where the plan names them."""
    target = run_dir / LIST_DIR
    target.mkdir()
    for stream, s in zip(plan["streams"], compiled.streams, strict=True):
        moved = target / s.written.path.name
        os.replace(s.written.path, moved)
        stream["ios"]["path"] = str(moved.resolve())  # type: ignore[typeddict-item]


def _settings(compiled: CompiledReplay) -> dict[str, Any]:
    o = compiled.options
    return {
        "traces": [str(p.resolve()) for p in o.traces],
        "mode": o.mode,
        "depth": o.depth,
        "speed": o.speed,
        "times": o.times if o.mode == "timed" else None,
        "deps": o.deps,
        "keep_gaps": o.keep_gaps,
        "writes": o.writes,
        "writeback_writes": sum(s.written.writeback for s in compiled.streams),
        "remap": o.remap,
        "align": compiled.align,
        "select": o.select.describe() or None,
        "split": o.split,
        "loop": o.loop,
        "duration_s": o.duration_s,
    }


def analyze(compiled: CompiledReplay, result: dict[str, Any], summary: dict[str, Any]) -> None:
    expectations = [s.expectation for s in compiled.streams]
    summary["replay"] = accuracy.summarize_replay(_settings(compiled), expectations, result)


def note(compiled: CompiledReplay) -> str:
    o = compiled.options
    records = sum(s.written.records for s in compiled.streams)
    what = f"replaying {records:,} IOs of {len(o.traces)} trace(s) {o.mode}"
    if o.mode == "qd":
        what += f":{o.depth}"
    if o.mode == "timed" and o.times == "queue":
        what += " at queue times"
    if o.deps:
        what += " with dependencies"
    if o.keep_gaps:
        what += ", keeping gaps"
    writeback = sum(s.written.writeback for s in compiled.streams)
    if writeback:
        what += f", {writeback:,} writeback writes through the page cache"
    if o.speed != 1.0:
        what += f" at speed {o.speed:g}"
    return what + f", remap {o.remap}" + (", looping" if o.loop else "")
