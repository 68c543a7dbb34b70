"""`tilemark trace capture`: every block request of a device, from the kernel, as a trace file.

The device and what serves it (a loop device's backing disk, a partition's disk: envinfo's
device tree) are traced through a tracefs instance of our own (tracefs.py: why tracefs, the
page format), the events paired into requests (pairing.py) and written as they come through
TraceWriter (bounded memory however long the capture). The capture runs for a duration, while
a command runs, or until SIGINT/SIGTERM, which stop it cleanly: the file is complete and says
it was interrupted. Events the kernel dropped are counted, shown live and stored
(`events_lost`), never silently lost. When tracing is impossible (not root, no tracefs, no
block tracepoints, a device that is not one) capture raises TracingUnavailable or UsageError
before anything is written.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from tilemark.errors import RunError, UsageError
from tilemark.telemetry import envinfo
from tilemark.trace import pairing
from tilemark.trace.tracefs import (
    EventConverter,
    Instance,
    TracingUnavailable,
    decode_pages,
    dev_text,
    find_tracefs,
    kernel_dev,
)

# How often the buffers are read: every numpy step costs the same for 10 events or 100,000,
# so few large batches cost far less CPU than many small ones (at 20,000 IOPS, 0.1 s rounds
# cost 3x the CPU of 0.5 s rounds); the buffers hold many seconds of events.
POLL_S = 0.5
PROGRESS_S = 1.0
# Events time-stamped this long before a read round began are surely committed and read.
COMMIT_MARGIN_NS = 20_000_000
# After the stop, how long completions of requests issued before it are still awaited.
COMPLETION_GRACE_S = 1.0
# A command still running after a signal stopped the capture gets this long to exit.
COMMAND_GRACE_S = 5.0
# Rounds of reading after tracing stopped (a round that gets nothing but was not told "empty"
# waits 10 ms): the buffers hold at most a few seconds of events.
DRAIN_ROUNDS = 1000


@dataclass(frozen=True)
class TracedDevice:
    """One block device whose requests are recorded."""

    name: str  # "loop0"
    dev: str  # "7:0"
    kind: str  # disk, partition, loop, ...
    depth: int  # 0: the device named (or the one serving the file named); 1: below it ...


@dataclass(frozen=True)
class CaptureProgress:
    """What the capture has recorded so far (handed to the progress callback every second)."""

    elapsed_s: float
    ios: int
    bytes: int
    mb_per_s: float  # over the last period
    iops: float  # over the last period
    events_lost: int
    command_running: bool | None  # None without a command


@dataclass(frozen=True)
class CaptureResult:
    """A finished capture: the file written and the summary of what it holds."""

    path: Path
    devices: tuple[TracedDevice, ...]
    duration_s: float
    ios: int
    bytes: int
    reads: int
    writes: int
    flushes: int
    discards: int
    read_bytes: int
    write_bytes: int
    size_mix: tuple[tuple[int, int], ...]  # (size in bytes, requests), most frequent first
    events_lost: int
    completions_without_issue: int  # requests issued before the capture began
    in_flight_at_end: int  # written with a null completion
    command: tuple[str, ...] | None
    command_exit: int | None  # the command's exit status (negative: killed by that signal)
    stopped_by: str  # "duration", "command", "SIGINT", "SIGTERM"
    notes: tuple[str, ...] = field(default=())

    @property
    def read_share(self) -> float | None:
        """Reads among read and write requests (None when there were none)."""
        rw = self.reads + self.writes
        return self.reads / rw if rw else None

    @property
    def iops(self) -> float:
        return self.ios / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def mb_per_s(self) -> float:
        return self.bytes / 1e6 / self.duration_s if self.duration_s > 0 else 0.0


def resolve_devices(device: str, with_backing: bool = True) -> list[TracedDevice]:
    """The block devices to trace for DEV: the device itself (or the device under a file's
    filesystem) and, with_backing, everything below it (envinfo.device_tree)."""
    path = Path(device)
    if not path.exists():
        raise UsageError(f"--device {device} does not exist; name a block device or a file.")
    tree = envinfo.device_tree(str(path))
    flat = envinfo.flat_devices(tree)
    if not flat:
        why = (tree.get("note") or "sysfs names no block device for it").removeprefix(
            "no block device: "
        )
        raise UsageError(f"--device {device} has no block device to trace ({why}).")
    out = []
    for d in flat:
        if not with_backing and d["depth"] > 0 and not (out and out[-1].kind == "partition"):
            continue
        out.append(TracedDevice(name=d["name"], dev=d["dev"], kind=d["kind"], depth=d["depth"]))
    return out


def _kdev(dev: str) -> int:
    major, minor = dev.split(":")
    return kernel_dev(int(major), int(minor))


def _disk_map(devices: list[TracedDevice]) -> dict[int, int]:
    """Partition dev_t -> its disk's (bios name the partition, requests the disk)."""
    out = {}
    for i, d in enumerate(devices):
        if d.kind == "partition" and i + 1 < len(devices):
            out[_kdev(d.dev)] = _kdev(devices[i + 1].dev)
    return out


def _is_our_trace(path: Path, _st: os.stat_result) -> bool:
    from tilemark.trace.schema import open_trace

    try:
        open_trace(path)
    except UsageError:
        return False
    return True


def check_output(out: Path, force: bool) -> None:
    """UsageError unless `out` may be written: its directory exists, it is not a link, and an
    existing file there is a trace tilemark wrote (or force)."""
    from tilemark.store.outputs import check_replaceable

    if not out.parent.is_dir():
        raise UsageError(f"-o {out}: the directory {out.parent} does not exist.")
    check_replaceable(out, force=force, ours=_is_our_trace, what="trace")


class _Stop:
    """Why the capture should stop, set by signal handlers and the main loop."""

    def __init__(self) -> None:
        self.reason: str | None = None

    def set(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason


class _Totals:
    """Running counters of the rows written (the end-of-capture summary)."""

    def __init__(self) -> None:
        self.ios = self.bytes = 0
        self.by_op = [0, 0, 0, 0]
        self.read_bytes = self.write_bytes = 0
        self.sizes: dict[int, int] = {}

    def add(self, rows: np.ndarray) -> None:
        sizes = rows["nsec"].astype(np.int64) * 512
        self.ios += len(rows)
        self.bytes += int(sizes.sum())
        counts = np.bincount(rows["op"], minlength=4)
        for i in range(4):
            self.by_op[i] += int(counts[i])
        self.read_bytes += int(sizes[rows["op"] == pairing.OP_READ].sum())
        self.write_bytes += int(sizes[rows["op"] == pairing.OP_WRITE].sum())
        data = sizes[(rows["op"] == pairing.OP_READ) | (rows["op"] == pairing.OP_WRITE)]
        uniq, n = np.unique(data, return_counts=True)
        for s, c in zip(uniq.tolist(), n.tolist(), strict=True):
            self.sizes[s] = self.sizes.get(s, 0) + c


def _batch(rows: np.ndarray, t0: int, comms: list[str]):
    """The trace schema's record batch of paired rows (times relative to t0)."""
    import pyarrow as pa

    from tilemark.trace.schema import OPS, TRACE_SCHEMA

    n = len(rows)
    done = rows["complete"] >= 0
    issue = rows["issue"] - t0
    complete = np.where(done, rows["complete"] - t0, 0)
    latency = np.where(done, rows["complete"] - rows["issue"], 0)
    queued = rows["queue"] >= 0
    queue = np.where(queued, rows["queue"] - t0, 0)
    flags = rows["flags"]
    op = rows["op"].astype(np.int8)
    flush = op == pairing.OP_FLUSH
    offset = np.where(flush, 0, rows["sector"].astype(np.int64) * 512)
    comm_idx = rows["comm"]
    comm_known = comm_idx >= 0
    comm_dict = pa.array(comms or [""], pa.string())
    comm = pa.DictionaryArray.from_arrays(
        pa.array(np.where(comm_known, comm_idx, 0), pa.int32(), mask=~comm_known), comm_dict
    ).cast(pa.string())
    devs, dev_inv = np.unique(rows["dev"], return_inverse=True)
    device = pa.DictionaryArray.from_arrays(
        pa.array(dev_inv.reshape(-1).astype(np.int32)),
        pa.array([dev_text(int(d)) for d in devs.tolist()] or [""], pa.string()),
    ).cast(pa.string())
    arrays = [
        pa.array(issue, pa.int64()),
        pa.array(complete, pa.int64(), mask=~done),
        pa.array(latency, pa.int64(), mask=~done),
        pa.DictionaryArray.from_arrays(pa.array(op, pa.int8()), pa.array(OPS, pa.string())),
        pa.array(offset, pa.int64()),
        pa.array(rows["nsec"].astype(np.int64) * 512, pa.int64()),
        pa.array((flags & pairing.SYNC) != 0, pa.bool_()),
        pa.array((flags & pairing.FUA) != 0, pa.bool_()),
        pa.array((flags & pairing.PREFLUSH) != 0, pa.bool_()),
        pa.array((flags & pairing.META) != 0, pa.bool_()),
        pa.array(rows["pid"], pa.int32()),
        comm,
        device,
        pa.array(queue, pa.int64(), mask=~queued),
    ]
    assert len(arrays[0]) == n
    return pa.RecordBatch.from_arrays(arrays, schema=TRACE_SCHEMA)


def capture(
    device: str,
    out: Path,
    *,
    duration_s: float | None = None,
    command: list[str] | None = None,
    progress: Callable[[CaptureProgress], None] | None = None,
    with_backing: bool = True,
    force: bool = False,
    tracefs: Path | None = None,
    buffer_kb: int | None = None,
) -> CaptureResult:
    """Trace every block request of `device` (and what serves it) into the trace file `out`
    for duration_s, while `command` runs, or until SIGINT/SIGTERM; return its summary."""
    from tilemark.trace.schema import TraceMeta, TraceWriter

    out = Path(out)
    if duration_s is not None and duration_s <= 0:
        raise UsageError(f"--duration must be positive, got {duration_s:g} s.")
    if command is not None:
        if not command:
            raise UsageError("nothing after `--`: name the command to trace.")
        if shutil.which(command[0]) is None:
            raise UsageError(f"the command {command[0]} was not found (after `--`).")
    if os.geteuid() != 0:
        raise TracingUnavailable(
            "tracing block requests needs root (the kernel's tracefs is root's only); run "
            "`tilemark trace capture` as root."
        )
    devices = resolve_devices(device, with_backing)
    check_output(out, force)
    root = find_tracefs(tracefs)
    traced = {d.dev for d in devices}
    under_out = {d["dev"] for d in envinfo.flat_devices(envinfo.device_tree(str(out.parent)))}
    self_traced = sorted(traced & under_out)
    kdevs = [_kdev(d.dev) for d in devices]
    uname = os.uname()
    meta = TraceMeta(
        source="capture",
        device=str(device),
        device_size=_device_size(devices[0]),
        command=list(command) if command else None,
        host=socket.gethostname(),
        kernel=f"{uname.sysname} {uname.release}",
        extra={
            "devices": [vars(d) for d in devices],
            "tracer": "tracefs: block_bio_queue, block_rq_issue, block_rq_complete",
        },
    )
    stop = _Stop()
    restore = _install_signal_handlers(stop)
    try:
        with Instance(root, kdevs, buffer_kb) as inst, TraceWriter(out, meta) as writer:
            result = _run(
                inst, writer, devices, duration_s, command, progress, stop, _disk_map(devices)
            )
            if self_traced:
                note = (
                    f"the trace file was written to a traced device ({', '.join(self_traced)}): "
                    "the capture's own writes are in the trace"
                )
                writer.meta.notes.append(note)
                result = dataclasses.replace(result, notes=(*result.notes, note))
    except OSError as e:
        raise RunError(f"the capture to {out} failed: {e.strerror or e}.") from None
    finally:
        restore()
    return result


def _device_size(d: TracedDevice) -> int | None:
    """Bytes of the traced device (sysfs counts 512-byte sectors), None when unknown."""
    major, minor = (int(x) for x in d.dev.split(":"))
    node = envinfo.sysfs_node(major, minor)
    try:
        return int((node / "size").read_text()) * 512 if node is not None else None
    except (OSError, ValueError):
        return None


def _install_signal_handlers(stop: _Stop) -> Callable[[], None]:
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    old = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        old[sig] = signal.signal(sig, lambda s, _f: stop.set(signal.Signals(s).name))

    def restore() -> None:
        for sig, handler in old.items():
            signal.signal(sig, handler)

    return restore


def _run(
    inst: Instance,
    writer: Any,
    devices: list[TracedDevice],
    duration_s: float | None,
    command: list[str] | None,
    progress: Callable[[CaptureProgress], None] | None,
    stop: _Stop,
    disk_of: dict[int, int],
) -> CaptureResult:
    converter = EventConverter(disk_of)
    pairer = pairing.Pairer()
    totals = _Totals()
    t0: int | None = None
    lost_in_pages = lost_unknown_pages = 0

    def take(buf: bytes) -> None:
        nonlocal lost_in_pages, lost_unknown_pages
        if buf:
            decoded = decode_pages(buf, inst.page, inst.formats)
            lost_in_pages += decoded.lost
            lost_unknown_pages += decoded.lost_unknown
            pairer.add(converter.events(decoded))

    def emit(rows: np.ndarray) -> None:
        nonlocal t0
        if not len(rows):
            return
        if t0 is None:
            t0 = int(rows["issue"][0])
        totals.add(rows)
        writer.write(_batch(rows, t0, converter.comms))

    _batch(np.zeros(0, pairing.ROW_DTYPE), 0, [])  # imports pyarrow.compute now, not mid-capture
    inst.start()
    started = time.monotonic_ns()
    wall_started = time.time_ns()
    proc = subprocess.Popen(command) if command else None
    deadline = started + int(duration_s * 1e9) if duration_s is not None else None
    last_progress, last_ios, last_bytes = started, 0, 0
    if progress is not None:  # tracing is on: the first call says so (elapsed 0)
        progress(CaptureProgress(0.0, 0, 0, 0.0, 0.0, 0, None if proc is None else True))
    while True:
        round_start = time.monotonic_ns()
        buf, drained = inst.read()
        take(buf)
        if drained:
            emit(pairer.advance(round_start - COMMIT_MARGIN_NS))
        now = time.monotonic_ns()
        if deadline is not None and now >= deadline:
            stop.set("duration")
        if proc is not None and proc.poll() is not None:
            stop.set("command")
        if stop.reason is not None:
            break
        if progress is not None and now - last_progress >= PROGRESS_S * 1e9:
            dt = (now - last_progress) / 1e9
            progress(
                CaptureProgress(
                    elapsed_s=(now - started) / 1e9,
                    ios=totals.ios,
                    bytes=totals.bytes,
                    mb_per_s=(totals.bytes - last_bytes) / 1e6 / dt,
                    iops=(totals.ios - last_ios) / dt,
                    events_lost=max(inst.losses(), lost_in_pages),
                    command_running=None if proc is None else proc.poll() is None,
                )
            )
            last_progress, last_ios, last_bytes = now, totals.ios, totals.bytes
        if drained:  # let the next batch gather
            time.sleep(max(0.0, POLL_S - (time.monotonic_ns() - round_start) / 1e9))
    stopped = time.monotonic_ns()
    command_exit = _end_command(proc, stop.reason)
    # Requests issued before the stop may complete just after it: trace on a little longer
    # for their completions, leaving out what is issued from now on.
    pairer.cutoff = stopped
    grace_end = time.monotonic_ns() + int(COMPLETION_GRACE_S * 1e9)
    while time.monotonic_ns() < grace_end:
        time.sleep(0.05)
        round_start = time.monotonic_ns()
        buf, drained = inst.read()
        take(buf)
        if drained:
            watermark = round_start - COMMIT_MARGIN_NS
            emit(pairer.advance(watermark))
            if watermark > stopped and not pairer.waiting_before(stopped):
                break
    inst.stop()
    for _ in range(DRAIN_ROUNDS):  # tracing is off: read what the buffers still hold
        buf, drained = inst.read()
        take(buf)
        if drained and not buf:
            break
        if not buf:
            time.sleep(0.01)
    emit(pairer.advance(stopped))
    emit(pairer.finish())
    lost = max(inst.losses(), lost_in_pages)
    counts = pairer.counts
    notes = _notes(counts, lost, lost_unknown_pages, stop.reason, proc, command_exit)
    meta = writer.meta
    meta.events_lost = lost
    meta.notes = list(notes)
    if t0 is not None:
        meta.start_epoch_ns = wall_started + (t0 - started)
    meta.extra.update(
        stopped_by=stop.reason,
        interrupted=stop.reason in ("SIGINT", "SIGTERM"),
        command_exit=command_exit,
        capture_started_epoch_ns=wall_started,
        capture_duration_ns=stopped - started,
        completions_without_issue=counts.completions_without_issue,
        in_flight_at_end=counts.in_flight_at_end,
        written_incomplete_early=counts.written_incomplete_early,
        other_ops=counts.other_ops,
    )
    size_mix = sorted(totals.sizes.items(), key=lambda kv: (-kv[1], kv[0]))
    return CaptureResult(
        path=writer.path,
        devices=tuple(devices),
        duration_s=(stopped - started) / 1e9,
        ios=totals.ios,
        bytes=totals.bytes,
        reads=totals.by_op[pairing.OP_READ],
        writes=totals.by_op[pairing.OP_WRITE],
        flushes=totals.by_op[pairing.OP_FLUSH],
        discards=totals.by_op[pairing.OP_DISCARD],
        read_bytes=totals.read_bytes,
        write_bytes=totals.write_bytes,
        size_mix=tuple(size_mix),
        events_lost=lost,
        completions_without_issue=counts.completions_without_issue,
        in_flight_at_end=counts.in_flight_at_end,
        command=tuple(command) if command else None,
        command_exit=command_exit,
        stopped_by=stop.reason or "duration",
        notes=tuple(notes),
    )


def _end_command(proc: subprocess.Popen | None, reason: str | None) -> int | None:
    """The command's exit status; a command still running when a signal or the duration ended
    the capture is sent that signal (SIGTERM after the duration) and waited for."""
    if proc is None:
        return None
    if proc.poll() is None and reason in ("SIGINT", "SIGTERM"):
        proc.send_signal(signal.SIGINT if reason == "SIGINT" else signal.SIGTERM)
        try:
            proc.wait(COMMAND_GRACE_S)
        except subprocess.TimeoutExpired:
            proc.kill()
    if proc.poll() is None:
        return None  # --duration ended the capture; the command goes on
    return proc.returncode


def _notes(counts, lost, lost_unknown_pages, reason, proc, command_exit) -> list[str]:
    notes = []
    if lost:
        notes.append(
            f"the kernel dropped {lost:,} events (its trace buffers were full): requests are "
            "missing from this trace"
        )
    if lost_unknown_pages:
        notes.append(f"{lost_unknown_pages} buffer pages said events were lost without a count")
    if counts.completions_without_issue:
        notes.append(
            f"{counts.completions_without_issue:,} requests completed that were issued before the "
            "capture began (or whose issue event was dropped); they are not in the trace"
        )
    if counts.in_flight_at_end:
        notes.append(
            f"{counts.in_flight_at_end:,} requests were still in flight when the capture ended "
            "(written without completion time)"
        )
    if counts.written_incomplete_early:
        notes.append(
            f"{counts.written_incomplete_early:,} requests had no completion within "
            f"{pairing.Pairer().max_pending_ns / 1e9:g} s (written without completion time)"
        )
    if counts.other_ops:
        notes.append(
            f"{counts.other_ops:,} requests of other operations (the kernel's rwbs 'N', e.g. "
            "write-zeroes or zone commands) are not in the trace"
        )
    if reason in ("SIGINT", "SIGTERM"):
        notes.append(f"interrupted by {reason}: the trace covers the capture up to then")
    if proc is not None and command_exit is None:
        notes.append("the command was still running when --duration ended the capture")
    return notes
