"""The kernel's block tracepoints, read through a tracefs instance of our own (docs/traces.md).

Why tracefs and not blktrace or BPF (measured, bench/results/*-capture-candidates.md): blktrace
reads relay files in debugfs, which a kernel in lockdown (integrity, as on the development VM)
refuses to open; bpftrace formats one text line per request in user space and cost more CPU at
50,000 IOPS than reading the kernel's binary pages; tracefs instances need nothing installed,
never disturb another user's tracing (each instance has its own buffers and event switches), and
count what they drop per CPU.

An instance `tilemark-<pid>` gets the events block_bio_queue (the submitter's pid and name),
block_rq_issue and block_rq_complete, filtered in the kernel to the traced devices. Its per-CPU
`trace_pipe_raw` files are read without blocking as binary ring-buffer pages; `decode_pages`
turns a batch of pages into one numpy record array per event with the field layout the
kernel's `format` files give, so nothing here hard-codes a kernel's struct layout.

Page format (kernel ring_buffer.c; libtraceevent's kbuffer reads the same): a header (u64
timestamp, u64 commit: data length, bit 31 "events were lost", bit 30 "their count is stored
after the data"), then events, each a u32 (type_len: 5 bits, time_delta: 27 bits) and its data.
type_len 1..28: data of type_len * 4 bytes follows; 0: a u32 length (itself included) then the
data; 29: padding (time_delta 0: the rest of the page is empty); 30: a time extension (a u32 of
the delta's upper bits); 31: an absolute timestamp. Each event's time is the previous one's plus
its delta, starting from the page's timestamp.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tilemark.errors import UsageError

DEFAULT_TRACEFS = Path("/sys/kernel/tracing")
TRACEFS_ENV = "TILEMARK_TRACEFS"
# The events read, and the fields each one needs (besides common_pid).
EVENTS = {
    "block_bio_queue": ("dev", "sector", "nr_sector", "rwbs", "comm"),
    "block_rq_issue": ("dev", "sector", "nr_sector", "rwbs", "comm"),
    "block_rq_complete": ("dev", "sector", "nr_sector", "rwbs", "error"),
}
INSTANCE_PREFIX = "tilemark-"
# Ring buffers: each request makes ~190 bytes of events (150,000 IOPS: ~28 MB/s). 128 MiB in
# all, spread over the CPUs (each 8..64 MiB), rides out a reader kept off the CPU for seconds.
BUFFER_TOTAL_KB = 128 * 1024
BUFFER_PER_CPU_KB = (8 * 1024, 64 * 1024)


def default_buffer_kb() -> int:
    """Ring-buffer size per CPU when the user does not choose one."""
    lo, hi = BUFFER_PER_CPU_KB
    return max(lo, min(hi, BUFFER_TOTAL_KB // (os.cpu_count() or 1)))


TYPE_PADDING, TYPE_TIME_EXTEND, TYPE_TIME_STAMP = 29, 30, 31
TS_SHIFT = 27
MISSED_EVENTS, MISSED_STORED = 1 << 31, 1 << 30
COMMIT_MASK = (1 << 30) - 1
ABS_TS_MASK = (1 << 59) - 1


class TracingUnavailable(UsageError):
    """The kernel or the user cannot trace block requests: one sentence saying what is missing
    (the CLI exits 2 and writes nothing)."""


def kernel_dev(major: int, minor: int) -> int:
    """The kernel's dev_t as tracepoints print it (MKDEV: major << 20 | minor)."""
    return (major << 20) | minor


def dev_text(kdev: int) -> str:
    return f"{kdev >> 20}:{kdev & ((1 << 20) - 1)}"


def find_tracefs(root: Path | None) -> Path:
    """The mounted tracefs: `root` when given, else $TILEMARK_TRACEFS (neither is ever mounted
    by us: tests point it at a directory without one), else /sys/kernel/tracing, mounted there
    when it is not yet (as root). TracingUnavailable when there is none."""
    if root is None and os.environ.get(TRACEFS_ENV):
        root = Path(os.environ[TRACEFS_ENV])
    if root is not None:
        if not (root / "instances").is_dir():
            raise TracingUnavailable(
                f"no tracefs at {root} (no instances directory): block requests cannot be traced "
                "without the kernel's tracefs."
            )
        return root
    root = DEFAULT_TRACEFS
    if (root / "instances").is_dir():
        return root
    legacy = Path("/sys/kernel/debug/tracing")
    if (legacy / "instances").is_dir():
        return legacy
    if not root.is_dir():
        raise TracingUnavailable(
            f"this kernel has no tracefs ({root} is missing): tracing block requests needs a "
            "kernel built with CONFIG_FTRACE and CONFIG_EVENT_TRACING."
        )
    done = subprocess.run(
        ["mount", "-t", "tracefs", "nodev", str(root)], capture_output=True, text=True
    )
    if done.returncode != 0 or not (root / "instances").is_dir():
        why = done.stderr.strip() or "no instances directory after mounting"
        raise TracingUnavailable(
            f"tracefs is not mounted at {root} and mounting it failed ({why}); mount it with "
            f"`mount -t tracefs nodev {root}`."
        )
    return root


@dataclass(frozen=True)
class EventFormat:
    """One event's id and record layout, from its tracefs `format` file."""

    name: str
    event_id: int
    dtype: np.dtype  # the record (common fields and ours) at their kernel offsets


_FIELD = re.compile(r"field:(?P<decl>[^;]+);\s*offset:(?P<off>\d+);\s*size:(?P<size>\d+);")


def read_format(path: Path, name: str, wanted: tuple[str, ...]) -> EventFormat:
    """The layout of `wanted` fields (and common_type, common_pid) of an event's format file."""
    text = path.read_text()
    found = re.search(r"^ID:\s*(\d+)", text, re.M)
    if found is None:
        raise TracingUnavailable(f"the kernel's format of {name} ({path}) has no ID line.")
    names, formats, offsets = [], [], []
    end = 0
    for m in _FIELD.finditer(text):
        decl, off, size = m["decl"].strip(), int(m["off"]), int(m["size"])
        field = re.sub(r"\[.*\]$", "", decl.split()[-1])
        end = max(end, off + size)
        if field not in ("common_type", "common_pid", *wanted):
            continue
        if "[" in decl.split()[-1]:
            kind = f"S{size}"
        elif field == "common_pid" or decl.startswith("int ") or " int " in f" {decl} ":
            kind = {4: "<i4", 8: "<i8", 2: "<i2"}[size] if "unsigned" not in decl else f"<u{size}"
        else:
            kind = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[size]
        names.append(field)
        formats.append(kind)
        offsets.append(off)
    missing = [f for f in wanted if f not in names]
    if missing:
        raise TracingUnavailable(
            f"the kernel's {name} event lacks the field(s) {', '.join(missing)} ({path})."
        )
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": end})
    return EventFormat(name=name, event_id=int(found[1]), dtype=dtype)


def page_size(instance: Path) -> int:
    """Bytes per ring-buffer page as trace_pipe_raw hands them out."""
    sub = instance / "buffer_subbuf_size_kb"  # kernels >= 6.8 let it be set; we keep its value
    with contextlib.suppress(OSError, ValueError):
        return int(sub.read_text().strip()) * 1024
    return os.sysconf("SC_PAGE_SIZE")


@dataclass
class Decoded:
    """Events of one batch of pages: per event name a record array and its timestamps (ns)."""

    records: dict[str, np.ndarray]
    times: dict[str, np.ndarray]
    lost: int  # events the pages say were lost before them (RB_MISSED_STORED counts)
    lost_unknown: int  # pages that say events were lost without saying how many


def _event_sizes(words: np.ndarray, at: np.ndarray, head: np.ndarray) -> np.ndarray:
    """The size in words of the events whose headers `head` are at word positions `at`."""
    type_len = (head & 31).astype(np.int64)
    size = np.where(type_len <= 28, type_len + 1, 2)
    var = (type_len == 0) | ((type_len == TYPE_PADDING) & ((head >> 5) != 0))
    if var.any():  # a length word follows the header (itself included in it)
        after = words[np.minimum(at[var] + 1, len(words) - 1)].astype(np.int64)
        size[var] = (after + 4 + 3) // 4
    return np.maximum(size, 1)


def decode_pages(buf: bytes, page: int, formats: dict[int, EventFormat]) -> Decoded:
    """Events of whole ring-buffer pages (`buf` is n * page bytes) by event name."""
    n_pages = len(buf) // page
    raw = np.frombuffer(buf, dtype=np.uint8, count=n_pages * page)
    words = raw.view("<u4")
    heads = raw.reshape(n_pages, page)[:, :16].copy().view("<u8")
    stamps, commits = heads[:, 0], heads[:, 1]
    lengths = np.minimum((commits & COMMIT_MASK).astype(np.int64), page - 16)
    lost = lost_unknown = 0
    for p in np.flatnonzero(commits & MISSED_EVENTS).tolist():
        if int(commits[p]) & MISSED_STORED:
            at = p * page + 16 + int(lengths[p])
            lost += int.from_bytes(buf[at : at + 8], "little")
        else:
            lost_unknown += 1
    # Walk every page's chain of events at once: one numpy step per event of the fullest page.
    words_per_page = page // 4
    cur = np.arange(n_pages, dtype=np.int64) * words_per_page + 4
    end = cur + lengths // 4
    found_pos, found_page = [], []
    live = np.flatnonzero(cur < end)
    while len(live):
        at = cur[live]
        head = words[at]
        empty = ((head & 31) == TYPE_PADDING) & ((head >> 5) == 0)  # the rest is empty
        live, at = live[~empty], at[~empty]
        found_pos.append(at)
        found_page.append(live)
        cur[live] = at + _event_sizes(words, at, head[~empty])
        live = live[cur[live] < end[live]]
    if found_pos:
        pos_all = np.concatenate(found_pos)
        page_all = np.concatenate(found_page)
        order = np.argsort(pos_all, kind="stable")  # pages in order, events in page order
        positions, page_of = pos_all[order], page_all[order]
    else:
        positions = page_of = np.zeros(0, np.int64)
    absolute: list[tuple[int, int]] = []  # (event number, absolute ts) of TIME_STAMP events
    for i in np.flatnonzero((words[positions] & 31) == TYPE_TIME_STAMP).tolist():
        w = int(positions[i])
        head = int(words[w])
        ts = ((int(words[w + 1]) << TS_SHIFT) | (head >> 5)) & ABS_TS_MASK
        absolute.append((i, ts | (int(stamps[page_of[i]]) & ~ABS_TS_MASK)))
    if not len(positions):
        empty = {name: np.zeros(0, f.dtype) for f in formats.values() for name in [f.name]}
        return Decoded(empty, {k: np.zeros(0, np.int64) for k in empty}, lost, lost_unknown)
    pos, pg = positions, page_of
    head = words[pos]
    type_len = head & 31
    delta = (head >> 5).astype(np.int64)
    after = words[np.minimum(pos + 1, len(words) - 1)].astype(np.int64)
    delta = np.where(type_len == TYPE_TIME_EXTEND, (after << TS_SHIFT) + delta, delta)
    # The kernel's reader ignores a discarded event's delta (rb_update_read_stamp).
    delta = np.where((type_len == TYPE_TIME_STAMP) | (type_len == TYPE_PADDING), 0, delta)
    # Time of each event: the page's timestamp plus the running sum of deltas within the page.
    run = np.cumsum(delta)
    first = np.searchsorted(pg, np.arange(n_pages))
    before = np.where(first > 0, run[np.maximum(first - 1, 0)], 0)
    times = stamps.astype(np.int64)[pg] + run - before[pg]
    for index, ts in absolute:  # rare: an absolute stamp resets the running time of its page
        same = (pg == pg[index]) & (np.arange(len(pg)) >= index)
        times[same] += ts - times[index]
    data = (type_len >= 1) & (type_len <= 28)
    payload = np.where(type_len == 0, pos + 2, pos + 1) * 4
    is_event = data | (type_len == 0)
    payload, times = payload[is_event], times[is_event]
    ids = raw[payload].astype(np.uint16) | (raw[payload + 1].astype(np.uint16) << 8)
    records: dict[str, np.ndarray] = {}
    out_times: dict[str, np.ndarray] = {}
    widest = max((f.dtype.itemsize for f in formats.values()), default=0)
    padded = np.concatenate([raw, np.zeros(widest + 8, np.uint8)])
    for event_id, fmt in formats.items():
        sel = ids == event_id
        width = fmt.dtype.itemsize
        # Every 4-byte-aligned record start as a row of `width` bytes (a view, no copy);
        # indexing it by the events' starts copies just their records.
        starts_at = np.lib.stride_tricks.as_strided(
            padded, shape=((len(padded) - width) // 4 + 1, width), strides=(4, 1), writeable=False
        )
        rows = starts_at[payload[sel] // 4]
        records[fmt.name] = rows.view(fmt.dtype).reshape(-1)
        out_times[fmt.name] = times[sel]
    return Decoded(records, out_times, lost, lost_unknown)


class Instance:
    """A tracefs instance of this process with the block events on, filtered to `devs`.

    `with Instance(tracefs, devs) as inst:` sets it up; `read()` returns the pages available
    now (never blocks); leaving the block switches the events off and removes the instance.
    The instance's `free_buffer` file is held open with `disable_on_free`, so a capture killed
    outright still stops its tracing and frees the buffers; the empty instance left behind is
    removed by the next capture."""

    def __init__(self, tracefs: Path, devs: list[int], buffer_kb: int | None = None):
        self.tracefs = tracefs
        self.devs = devs
        self.buffer_kb = buffer_kb or default_buffer_kb()
        self.path = tracefs / "instances" / f"{INSTANCE_PREFIX}{os.getpid()}"
        self.formats: dict[int, EventFormat] = {}
        self.page = 4096
        self._fds: list[int] = []
        self._free_fd: int | None = None
        self.cpus: list[int] = []

    def __enter__(self) -> Instance:
        _remove_stale_instances(self.tracefs)
        events = self.tracefs / "events" / "block"
        for name in EVENTS:
            if not (events / name / "format").exists():
                raise TracingUnavailable(
                    f"this kernel has no {name} tracepoint ({events / name} is missing): "
                    "tracing block requests needs CONFIG_BLOCK with CONFIG_EVENT_TRACING."
                )
        try:
            self.path.mkdir()
        except FileExistsError:
            _remove_instance(self.path)
            self.path.mkdir()
        except PermissionError:
            raise TracingUnavailable(
                f"cannot create a tracefs instance in {self.tracefs / 'instances'} (permission "
                "denied): tracing block requests needs root."
            ) from None
        except OSError as e:
            raise TracingUnavailable(
                f"cannot create a tracefs instance in {self.tracefs / 'instances'}: "
                f"{e.strerror or e}."
            ) from None
        try:
            self._setup()
        except BaseException:
            self.close()
            raise
        return self

    def _write(self, rel: str, value: str) -> None:
        try:
            (self.path / rel).write_text(value + "\n")
        except OSError as e:
            raise TracingUnavailable(
                f"cannot set {rel} of the tracefs instance {self.path} to {value!r}: "
                f"{e.strerror or e}."
            ) from None

    def _setup(self) -> None:
        for name, wanted in EVENTS.items():
            fmt = read_format(self.path / "events" / "block" / name / "format", name, wanted)
            self.formats[fmt.event_id] = fmt
        self._write("tracing_on", "0")
        self._write("buffer_size_kb", str(self.buffer_kb))
        self._write("options/overwrite", "0")  # a full buffer drops new events and counts them
        clocks = (self.path / "trace_clock").read_text()
        if "mono" in clocks.replace("[", " ").replace("]", " ").split():
            self._write("trace_clock", "mono")  # the same clock as time.monotonic_ns()
        with contextlib.suppress(TracingUnavailable):
            self._write("options/disable_on_free", "1")
            self._free_fd = os.open(self.path / "free_buffer", os.O_WRONLY)
        devices = " || ".join(f"dev == {d}" for d in self.devs)
        for name in EVENTS:
            self._write(f"events/block/{name}/filter", devices)
            self._write(f"events/block/{name}/enable", "1")
        self.page = page_size(self.path)
        for cpu_dir in sorted(
            (self.path / "per_cpu").glob("cpu*"), key=lambda p: int(p.name[3:] or 0)
        ):
            pipe = cpu_dir / "trace_pipe_raw"
            self._fds.append(os.open(pipe, os.O_RDONLY | os.O_NONBLOCK))
            self.cpus.append(int(cpu_dir.name[3:]))

    def start(self) -> None:
        self._write("tracing_on", "1")

    def stop(self) -> None:
        """Stop recording (what is in the buffers can still be read)."""
        self._write("tracing_on", "0")

    def read(self, max_pages: int = 4096) -> tuple[bytes, bool]:
        """The pages available now on every CPU, concatenated (at most max_pages), and whether
        every CPU's buffer was read empty (then every event before this call is in them)."""
        chunks: list[bytes] = []
        drained = True
        for fd in self._fds:
            while True:
                if len(chunks) >= max_pages:
                    drained = False
                    break
                try:
                    chunk = os.read(fd, self.page)
                except BlockingIOError:
                    break
                except OSError as e:
                    if e.errno in (errno.EAGAIN, errno.EINTR):
                        break
                    raise
                if not chunk:
                    # The kernel answers 0 bytes (not EAGAIN) while a writer on this CPU is in
                    # the middle of an event: what is committed has been read, and the event
                    # being written is younger than the watermark's margin.
                    break
                if len(chunk) < self.page:
                    chunk = chunk + bytes(self.page - len(chunk))
                chunks.append(chunk)
        return b"".join(chunks), drained

    def losses(self) -> int:
        """Events the kernel dropped or overwrote in this instance, over all CPUs."""
        total = 0
        for cpu in self.cpus:
            with contextlib.suppress(OSError):
                for line in (
                    (self.path / "per_cpu" / f"cpu{cpu}" / "stats").read_text().splitlines()
                ):
                    key, _, value = line.partition(":")
                    if key.strip() in ("overrun", "dropped events") and value.split():
                        total += int(value.split()[0])
        return total

    def close(self) -> None:
        """Switch the events off and remove the instance (no file of it may be open then)."""
        for fd in self._fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._fds = []
        if self._free_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._free_fd)  # disable_on_free: tracing stops, buffers freed
            self._free_fd = None
        _remove_instance(self.path)

    def __exit__(self, *exc: object) -> None:
        self.close()


def _remove_instance(path: Path) -> None:
    with contextlib.suppress(OSError):
        (path / "tracing_on").write_text("0\n")
    for name in EVENTS:
        with contextlib.suppress(OSError):
            (path / "events" / "block" / name / "enable").write_text("0\n")
    with contextlib.suppress(OSError):
        path.rmdir()


def _remove_stale_instances(tracefs: Path) -> None:
    """Instances of tilemark captures whose process is gone (killed before cleaning up)."""
    with contextlib.suppress(OSError):
        for inst in (tracefs / "instances").glob(f"{INSTANCE_PREFIX}*"):
            pid = inst.name[len(INSTANCE_PREFIX) :]
            if pid.isdigit() and not Path(f"/proc/{pid}").exists():
                _remove_instance(inst)


_ONES = np.uint64(0x0101010101010101)
_HIGHS = np.uint64(0x8080808080808080)


def _before_nul(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The bytes of each little-endian u64 before its first NUL (the rest zeroed), and
    whether it had a NUL (the classic has-zero-byte bit trick, exact for the first one)."""
    marks = (v - _ONES) & ~v & _HIGHS
    low = marks & (~marks + np.uint64(1))  # the first NUL's high bit
    has = marks != 0
    mask = np.where(has, (low >> np.uint64(7)) - np.uint64(1), ~np.uint64(0))
    return v & mask, has


def _string_keys(strings: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """C strings in fixed-width fields (bytes after the NUL are leftovers, not the string's)
    as 64-bit keys: (distinct keys, index of each one's first occurrence, key of every row)."""
    n, width = len(strings), strings.dtype.itemsize
    padded = (width + 7) // 8 * 8
    raw = np.zeros((n, padded), np.uint8)
    raw[:, :width] = np.ascontiguousarray(strings).view(np.uint8).reshape(n, width)
    words = raw.view("<u8")
    key, ended = _before_nul(words[:, 0].copy())
    for i in range(1, words.shape[1]):  # names longer than 7 bytes: mix the next word in
        more, has = _before_nul(words[:, i].copy())
        key = np.where(ended, key, key ^ (more * np.uint64(0x9E3779B97F4A7C15) + np.uint64(i)))
        ended |= has
    keys, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    return keys, first, inverse.reshape(-1)


class EventConverter:
    """Decoded tracepoint records -> pairing events (pairing.EVENT_DTYPE): rwbs strings to op
    and flags, partition numbers to their disk's (requests carry the disk's), process names to
    indexes into `comms` (a table kept for the whole capture)."""

    def __init__(self, disk_of: dict[int, int]):
        self.disk_of = disk_of
        self.comms: list[str] = []
        self._comm_index: dict[int, int] = {}
        self._rwbs: dict[int, tuple[int, int]] = {}

    def _intern(self, names: np.ndarray) -> np.ndarray:
        keys, first, inverse = _string_keys(names)
        table = np.empty(len(keys), np.int32)
        for i, (key, at) in enumerate(zip(keys.tolist(), first.tolist(), strict=True)):
            idx = self._comm_index.get(key)
            if idx is None:
                name = bytes(names[at]).split(b"\0", 1)[0]
                idx = self._comm_index[key] = len(self.comms)
                self.comms.append(name.decode("utf-8", "replace"))
            table[i] = idx
        return table[inverse]

    def _ops(self, rwbs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        from tilemark.trace.pairing import parse_rwbs

        keys, first, inverse = _string_keys(rwbs)
        op = np.empty(len(keys), np.uint8)
        flags = np.empty(len(keys), np.uint8)
        for i, (key, at) in enumerate(zip(keys.tolist(), first.tolist(), strict=True)):
            if key not in self._rwbs:
                self._rwbs[key] = parse_rwbs(bytes(rwbs[at]))
            op[i], flags[i] = self._rwbs[key]
        return op[inverse], flags[inverse]

    def events(self, decoded: Decoded) -> np.ndarray:
        from tilemark.trace.pairing import EVENT_DTYPE, C, D, Q

        parts = []
        for name, kind in (("block_bio_queue", Q), ("block_rq_issue", D), ("block_rq_complete", C)):
            rec = decoded.records.get(name)
            if rec is None or not len(rec):
                continue
            ev = np.zeros(len(rec), EVENT_DTYPE)
            ev["t"] = decoded.times[name]
            ev["kind"] = kind
            ev["op"], ev["flags"] = self._ops(rec["rwbs"])
            dev = rec["dev"].astype(np.uint32)
            if self.disk_of:
                for part, disk in self.disk_of.items():
                    dev[dev == part] = disk
            ev["dev"] = dev
            ev["sector"] = rec["sector"]
            ev["nsec"] = rec["nr_sector"]
            ev["pid"] = rec["common_pid"]
            ev["comm"] = self._intern(rec["comm"]) if "comm" in rec.dtype.names else -1
            parts.append(ev)
        return np.concatenate(parts) if parts else np.zeros(0, EVENT_DTYPE)
