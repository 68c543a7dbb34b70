"""What the devices underneath and the host did while a run ran (docs/results-schema.md,
telemetry).

tilemark sees only the IOs it issues (the front end). The block devices that serve a target
(envinfo.device_tree: file -> filesystem -> device, partition -> disk, dm/md/loop -> slaves
and backing files) show what reached storage (the back end): the page cache absorbing
reads, a RAID's write penalty, another tenant's IO. A sampler thread reads /proc/diskstats,
/proc/stat, the engine threads' CPU time and /proc/pressure at the engine's interval
boundaries, so every interval of the run has a device row per device and one host row.

Device figures follow iostat -x (sysstat), over the time between two samples dt (s):

    r/s = d(reads completed) / dt             w/s likewise
    MB/s = d(sectors) * 512 / 1e6 / dt        (MB = 10^6 bytes, as everywhere in tilemark)
    rrqm/s = d(reads merged) / dt             wrqm/s likewise
    r_await = d(ms reading) / d(reads)        w_await likewise (ms; null without IOs)
    aqu-sz = d(weighted ms doing IO) / (dt * 1000)
    %util = d(ms doing IO) / (dt * 1000) * 100

Host CPU is the share of all CPUs' time in /proc/stat: user (user + nice), system (system +
irq + softirq), iowait, steal and idle (guest time is already inside user). busy = 100 - idle
- iowait: the CPUs did work (or were taken by the hypervisor, steal) rather than wait. The
engine's CPU is the utime + stime of its IO threads ("tilemark-engine"), in % of one CPU, like
top; its aggregation thread's ("tilemark-agg": the interval frames and the run's totals,
merged as the IO threads send them) is counted apart, and the rest of the process is the
front end. Pressure (PSI): avg10 as the kernel reports it at the sample, and the share of the
interval some (or all, "full") runnable tasks stalled on the resource, from the `total`
counter.

Longer than 600 lines because the sampler thread, its readers of /proc and /sys and the
per-interval rows it produces share one time base and one set of counters.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from tilemark.store.layout import SCHEMA_VERSION, VERSION_KEY
from tilemark.telemetry import envinfo, kmsg

PROC_DISKSTATS = Path("/proc/diskstats")
PROC_STAT = Path("/proc/stat")
PROC_PRESSURE = Path("/proc/pressure")
PROC_TASKS = Path("/proc/self/task")
ENGINE_THREAD = "tilemark-engine"
AGGREGATE_THREAD = "tilemark-agg"
SECTOR_BYTES = 512
PSI_RESOURCES = ("io", "cpu", "memory")
# A run whose host CPUs were busier than this on average is tool-bound.
TOOL_BOUND_CPU_PCT = 85.0
# ... or one of whose open-loop streams issued more than this share of its IOs > 1 ms late.
TOOL_BOUND_LATE_SHARE = 0.01

DEVICES_FILE = "devices.parquet"
DEVICES_LOG = "devices.arrows"
HOST_FILE = "host.parquet"
HOST_LOG = "host.arrows"
TELEMETRY_FILES = (DEVICES_FILE, DEVICES_LOG, HOST_FILE, HOST_LOG)

_META = {VERSION_KEY: str(SCHEMA_VERSION).encode()}
_INTERVAL_COLUMNS = [
    ("run_id", pa.string()),
    ("interval", pa.int32()),
    ("phase", pa.string()),
    ("start_ns", pa.int64()),
    ("end_ns", pa.int64()),
    ("sample_ns", pa.int64()),
]
DEVICE_COUNTERS = (
    "reads",
    "read_merges",
    "read_sectors",
    "read_ms",
    "writes",
    "write_merges",
    "write_sectors",
    "write_ms",
    "in_flight",
    "io_ms",
    "weighted_ms",
)
DEVICE_RATES = (
    "read_iops",
    "write_iops",
    "read_mbps",
    "write_mbps",
    "read_merges_s",
    "write_merges_s",
    "r_await_ms",
    "w_await_ms",
    "aqu_sz",
    "util_pct",
)
DEVICE_SCHEMA = pa.schema(
    [
        *_INTERVAL_COLUMNS,
        ("device", pa.string()),
        ("dev", pa.string()),
        ("kind", pa.string()),
        ("depth", pa.int32()),
        *[(c, pa.int64()) for c in DEVICE_COUNTERS],
        *[(c, pa.float64()) for c in DEVICE_RATES],
    ],
    metadata=_META,
)
CPU_FIELDS = ("user", "system", "iowait", "steal", "idle", "busy")
PSI_COLUMNS = tuple(
    f"{res}_{kind}_{stat}"
    for res in PSI_RESOURCES
    for kind in ("some", "full")
    for stat in ("avg10", "pct")
)
HOST_SCHEMA = pa.schema(
    [
        *_INTERVAL_COLUMNS,
        *[(f"cpu_{f}_pct", pa.float64()) for f in CPU_FIELDS],
        ("engine_cpu_pct", pa.float64()),
        ("aggregate_cpu_pct", pa.float64()),
        ("process_cpu_pct", pa.float64()),
        *[(c, pa.float64()) for c in PSI_COLUMNS],
    ],
    metadata=_META,
)


# ---------------------------------------------------------------------------------------------
# reading /proc


def read_diskstats(devs: set[str]) -> dict[str, tuple[int, ...]]:
    """The first 11 counters of /proc/diskstats for the devices named "major:minor"."""
    out: dict[str, tuple[int, ...]] = {}
    try:
        text = PROC_DISKSTATS.read_text()
    except OSError:
        return out
    for line in text.splitlines():
        fields = line.split()
        if len(fields) < 14:
            continue
        dev = f"{fields[0]}:{fields[1]}"
        if dev in devs:
            out[dev] = tuple(int(v) for v in fields[3:14])
    return out


def read_cpu() -> tuple[int, ...] | None:
    """The aggregate `cpu` line of /proc/stat: user nice system idle iowait irq softirq steal."""
    try:
        with open(PROC_STAT) as f:
            first = f.readline().split()
    except OSError:
        return None
    if not first or first[0] != "cpu" or len(first) < 9:
        return None
    return tuple(int(v) for v in first[1:9])


def _thread_ticks() -> tuple[dict[str, int] | None, dict[str, int] | None, int | None]:
    """utime + stime clock ticks of each engine IO thread and of each aggregation thread (by
    thread id), and of the whole process. Per thread, so that a thread that ends between two
    samples does not make the engine's CPU time run backwards (its sum would drop by all that
    thread had used). No IO thread: None (the engine's CPU is unknown); no aggregation thread:
    {} (it used none)."""
    threads: dict[str, dict[str, int]] = {ENGINE_THREAD: {}, AGGREGATE_THREAD: {}}
    found = False
    process = None
    try:
        with open(PROC_TASKS.parent / "stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        process = int(fields[11]) + int(fields[12])  # utime, stime (fields 14, 15)
        for task in os.listdir(PROC_TASKS):
            try:
                with open(PROC_TASKS / task / "stat") as f:
                    text = f.read()
            except OSError:
                continue  # the thread ended
            name = text[text.index("(") + 1 : text.rindex(")")]
            if name in threads:
                fields = text.rsplit(")", 1)[1].split()
                threads[name][task] = int(fields[11]) + int(fields[12])
                found = found or name == ENGINE_THREAD
    except (OSError, ValueError, IndexError):
        return None, None, process
    engine = threads[ENGINE_THREAD] if found else None
    return engine, threads[AGGREGATE_THREAD], process


def read_pressure() -> dict[str, float]:
    """PSI of io, cpu and memory: {"io_some_avg10": 0.4, "io_some_total": us, ...}."""
    out: dict[str, float] = {}
    for res in PSI_RESOURCES:
        try:
            text = (PROC_PRESSURE / res).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            kind, *pairs = line.split()
            for pair in pairs:
                key, _, value = pair.partition("=")
                if key in ("avg10", "total"):
                    out[f"{res}_{kind}_{key}"] = float(value)
    return out


class Sample:
    """Counters at one moment (run time ns)."""

    __slots__ = ("t_ns", "disks", "cpu", "engine_ticks", "aggregate_ticks", "process_ticks", "psi")

    def __init__(self, t_ns: int, devs: set[str]):
        self.t_ns = t_ns
        self.disks = read_diskstats(devs)
        self.cpu = read_cpu()
        self.engine_ticks, self.aggregate_ticks, self.process_ticks = _thread_ticks()
        self.psi = read_pressure()


# ---------------------------------------------------------------------------------------------
# per-interval figures


def _div(a: float, b: float) -> float | None:
    return a / b if b > 0 else None


def device_figures(a: tuple[int, ...], b: tuple[int, ...], dt_s: float) -> dict[str, Any]:
    """Counter deltas and iostat -x figures of one device between two samples."""
    d = [max(0, y - x) for x, y in zip(a, b, strict=True)]
    counters = dict(zip(DEVICE_COUNTERS, d, strict=True))
    counters["in_flight"] = b[8]  # a gauge, not a counter: the value at the end
    reads, writes = counters["reads"], counters["writes"]
    # io_ticks advance in whole jiffies while the sample times are exact, so a device busy the
    # whole interval can read a jiffy over 100% (100.8% of a 250 ms interval seen on a loop
    # device); busy time cannot exceed the interval, so cap it as iostat does.
    util = _div(counters["io_ms"] * 100.0, dt_s * 1000)
    return {
        **counters,
        "read_iops": _div(reads, dt_s),
        "write_iops": _div(writes, dt_s),
        "read_mbps": _div(counters["read_sectors"] * SECTOR_BYTES / 1e6, dt_s),
        "write_mbps": _div(counters["write_sectors"] * SECTOR_BYTES / 1e6, dt_s),
        "read_merges_s": _div(counters["read_merges"], dt_s),
        "write_merges_s": _div(counters["write_merges"], dt_s),
        "r_await_ms": _div(counters["read_ms"], reads),
        "w_await_ms": _div(counters["write_ms"], writes),
        "aqu_sz": _div(counters["weighted_ms"], dt_s * 1000),
        "util_pct": None if util is None else min(util, 100.0),
    }


def cpu_figures(a: tuple[int, ...] | None, b: tuple[int, ...] | None) -> dict[str, Any]:
    """Host CPU shares in % between two /proc/stat samples (None when unreadable)."""
    if a is None or b is None:
        return {f"cpu_{f}_pct": None for f in CPU_FIELDS}
    user, nice, system, idle, iowait, irq, softirq, steal = (
        max(0, y - x) for x, y in zip(a, b, strict=True)
    )
    total = user + nice + system + idle + iowait + irq + softirq + steal
    if total <= 0:
        return {f"cpu_{f}_pct": None for f in CPU_FIELDS}

    def pct(v: int) -> float:
        return 100.0 * v / total

    return {
        "cpu_user_pct": pct(user + nice),
        "cpu_system_pct": pct(system + irq + softirq),
        "cpu_iowait_pct": pct(iowait),
        "cpu_steal_pct": pct(steal),
        "cpu_idle_pct": pct(idle),
        "cpu_busy_pct": pct(total - idle - iowait),
    }


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _ticks_used(a: int | dict[str, int], b: int | dict[str, int]) -> int | None:
    """Clock ticks used between two samples: of the process, or summed over the engine
    threads (a thread started since counts from 0). When an engine thread of the first sample
    has ended by the second, its ticks since the first are gone with it: the figure is
    unknown (None). Leaving that thread out made the last interval of a run show the engine
    at half its CPU and the front end at 80% of a CPU, a tenfold front-end share over a 10 s
    run (bench/streams.py, 1,000 streams)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if any(tid not in b for tid in a):
            return None
        return sum(max(0, ticks - a.get(tid, 0)) for tid, ticks in b.items())
    return max(0, int(b) - int(a))  # type: ignore[arg-type]


def host_figures(a: Sample, b: Sample) -> dict[str, Any]:
    dt_s = (b.t_ns - a.t_ns) / 1e9
    out: dict[str, Any] = cpu_figures(a.cpu, b.cpu)
    for key, ticks_a, ticks_b in (
        ("engine_cpu_pct", a.engine_ticks, b.engine_ticks),
        ("aggregate_cpu_pct", a.aggregate_ticks, b.aggregate_ticks),
        ("process_cpu_pct", a.process_ticks, b.process_ticks),
    ):
        # The engine's threads are gone at the closing sample of a run's last interval when
        # they ended first: that interval's engine CPU is unknown (None).
        used = None if ticks_a is None or ticks_b is None else _ticks_used(ticks_a, ticks_b)
        out[key] = None if used is None or dt_s <= 0 else 100.0 * used / _TICK / dt_s
    for res in PSI_RESOURCES:
        for kind in ("some", "full"):
            base = f"{res}_{kind}"
            out[f"{base}_avg10"] = b.psi.get(f"{base}_avg10")
            t0, t1 = a.psi.get(f"{base}_total"), b.psi.get(f"{base}_total")
            out[f"{base}_pct"] = (
                None if t0 is None or t1 is None or dt_s <= 0 else (t1 - t0) / 1e4 / dt_s
            )
    return out


# ---------------------------------------------------------------------------------------------
# the sampler


def boundaries(plan: dict[str, Any]) -> Callable[[int], int]:
    """The engine's interval rule (crates/engine clock.rs boundary_after): the end of the
    interval that starts at run time `start` (ns)."""
    interval = int(plan.get("interval_ms") or 1000) * 1_000_000
    warmup = int(plan.get("warmup_ms") or 0) * 1_000_000

    def after(start: int) -> int:
        return min(start + interval, warmup) if start < warmup else start + interval

    return after


class Telemetry:
    """Resolves a run's devices, samples them at the engine's interval boundaries, and turns
    interval snapshots into device and host rows.

    start() right after the engine started (its run time 0 is then, to well under a
    millisecond); rows(snapshots) returns the rows of the snapshots whose closing sample is
    taken (the others wait for the next call); finish() takes the last sample and returns the
    rest.
    """

    def __init__(self, plan: dict[str, Any], target_paths: list[str], run_id: str = ""):
        self.plan = plan
        self.run_id = run_id
        self.trees = [envinfo.device_tree(p) for p in target_paths]
        self.devices: list[dict[str, Any]] = []
        seen: dict[str, dict[str, Any]] = {}
        for i, tree in enumerate(self.trees):
            for dev in envinfo.flat_devices(tree):
                if dev["dev"] in seen:
                    seen[dev["dev"]]["targets"].append(i)
                    seen[dev["dev"]]["depth"] = min(seen[dev["dev"]]["depth"], dev["depth"])
                    continue
                seen[dev["dev"]] = {**dev, "targets": [i]}
                self.devices.append(seen[dev["dev"]])
        self.notes: list[str] = []
        for tree in self.trees:
            if not tree["devices"]:
                why = tree.get("note") or f"no block device found for {tree['path']}"
                self.notes.append(f"device telemetry unavailable for {tree['path']}: {why}")
        self._devs = {d["dev"] for d in self.devices}
        first = read_diskstats(self._devs)
        for d in self.devices:
            if d["dev"] not in first:
                self.notes.append(
                    f"device telemetry unavailable for {d['name']} ({d['dev']}): "
                    "not in /proc/diskstats"
                )
        self._devs &= set(first)
        # the kernel's messages about these devices (and the target files) from now on
        self.kernel = kmsg.KernelLog(
            [d["name"] for d in self.devices], [d["dev"] for d in self.devices], target_paths
        )
        self.kernel.start()
        if self.kernel.note:
            self.notes.append(self.kernel.note)
        self.kernel_records: list[kmsg.Record] = []
        self.devices = [d for d in self.devices if d["dev"] in self._devs]
        if read_cpu() is None:
            self.notes.append("host CPU telemetry unavailable: /proc/stat cannot be read")
        if not read_pressure():
            self.notes.append(
                "pressure stall information unavailable: /proc/pressure cannot be read "
                "(kernel without CONFIG_PSI, or psi=0)"
            )
        self._after = boundaries(plan)
        self._samples: list[Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0
        self._pending: list[dict[str, Any]] = []
        self.latest: dict[str, Any] | None = None  # last interval's figures, for the live view
        self.totals = Totals()

    def record(self) -> dict[str, Any]:
        """What run.json keeps: the device trees of the targets, the sampled devices, notes."""
        return {
            "targets": self.trees,
            "devices": self.devices,
            "notes": self.notes,
            "files": {"devices": DEVICES_FILE, "host": HOST_FILE},
        }

    # sampling

    def start(self) -> None:
        self._t0 = time.monotonic_ns()
        self._take(0)
        self._thread = threading.Thread(target=self._loop, name="tilemark-telemetry", daemon=True)
        self._thread.start()

    def _take(self, t_ns: int | None = None) -> None:
        now = time.monotonic_ns() - self._t0 if t_ns is None else t_ns
        try:
            sample = Sample(now, self._devs)
        except Exception as e:  # telemetry must never cost a run: say so and stop sampling
            if not self._stop.is_set():
                self.notes.append(f"telemetry stopped: reading /proc failed: {e}")
            self._stop.set()
            return
        with self._lock:
            self._samples.append(sample)

    def _loop(self) -> None:
        boundary = self._after(0)
        while not self._stop.is_set():
            wait = (self._t0 + boundary - time.monotonic_ns()) / 1e9
            if wait > 0 and self._stop.wait(wait):
                return
            self._take()
            # Late (a busy host): skip the boundaries already past rather than sample them
            # all at once, which would give intervals of almost no time and absurd rates.
            now = time.monotonic_ns() - self._t0
            boundary = self._after(boundary)
            while boundary <= now:
                boundary = self._after(boundary)

    def stop(self) -> None:
        """Stop sampling and take the closing sample of the run's last interval; read what
        the kernel said about the devices meanwhile (kernel_records)."""
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._thread = None
            self._take()
        self.kernel_records += self.kernel.read()

    # rows

    def _nearest(self, t_ns: int) -> Sample:
        return min(self._samples, key=lambda s: abs(s.t_ns - t_ns))

    def rows(
        self, snapshots: list[dict[str, Any]], *, final: bool = False
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """Device and host rows of the snapshots (and earlier ones held back) whose closing
        sample exists; all of them when `final`."""
        # Only the interval's identity is kept (not its histograms) while it waits.
        self._pending.extend(
            {k: snap.get(k) for k in ("interval", "phase", "start_ns", "end_ns")}
            for snap in snapshots
        )
        dev_rows: list[dict[str, Any]] = []
        host_rows: list[dict[str, Any]] = []
        with self._lock:
            if not self._samples:
                return dev_rows, host_rows
            last = self._samples[-1].t_ns
            while self._pending:
                snap = self._pending[0]
                start, end = int(snap["start_ns"]), int(snap["end_ns"])
                # The sampler wakes at the boundary the engine reports at; give it 2 ms.
                if not final and last < end - 2_000_000:
                    break
                self._pending.pop(0)
                a, b = self._nearest(start), self._nearest(end)
                if b.t_ns <= a.t_ns:
                    continue
                dt_s = (b.t_ns - a.t_ns) / 1e9
                base = {
                    "run_id": self.run_id,
                    "interval": int(snap["interval"]),
                    "phase": snap.get("phase"),
                    "start_ns": start,
                    "end_ns": end,
                    "sample_ns": b.t_ns - a.t_ns,
                }
                devices = []
                for d in self.devices:
                    x, y = a.disks.get(d["dev"]), b.disks.get(d["dev"])
                    if x is None or y is None:
                        continue
                    row = {
                        **base,
                        "device": d["name"],
                        "dev": d["dev"],
                        "kind": d["kind"],
                        "depth": d["depth"],
                        **device_figures(x, y, dt_s),
                    }
                    devices.append(row)
                host = {**base, **host_figures(a, b)}
                dev_rows.extend(devices)
                host_rows.append(host)
                self.latest = {"devices": devices, "host": host}
            self.totals.add(dev_rows, host_rows)
            # Samples before the oldest interval still to come are no longer needed.
            keep_from = int(self._pending[0]["start_ns"]) if self._pending else last
            older = [s for s in self._samples if s.t_ns <= keep_from]
            if len(older) > 1:
                drop = len(older) - 1
                self._samples = self._samples[drop:]
        return dev_rows, host_rows

    def live_line(self) -> str | None:
        """One line for the live view: device util and IOPS, host CPU, IO pressure."""
        if self.latest is None:
            return None
        return live_line(self.latest["devices"], self.latest["host"])


def live_line(devices: list[dict[str, Any]], host: dict[str, Any]) -> str:
    parts = []
    for d in devices:
        iops = (d["read_iops"] or 0) + (d["write_iops"] or 0)
        parts.append(f"{d['device']} {d['util_pct'] or 0:.0f}% util {iops:,.0f} IOPS")
    if host.get("cpu_busy_pct") is not None:
        parts.append(f"host CPU {host['cpu_busy_pct']:.0f}%")
    if host.get("io_some_pct") is not None:
        parts.append(f"io pressure {host['io_some_pct']:.0f}%")
    return "devices: " + " | ".join(parts) if parts else ""


# ---------------------------------------------------------------------------------------------
# totals: front end vs back end, and the tool-bound verdict


@dataclass
class WeightedMean:
    """A mean of interval figures, each weighted by its interval's length (ns)."""

    total: float = 0.0
    weight: int = 0

    def add(self, value: float, weight: int) -> None:
        self.total += value * weight
        self.weight += weight

    @property
    def value(self) -> float | None:
        return self.total / self.weight if self.weight else None


class Totals:
    """Figures over the measurement intervals, accumulated row by row (a long run's rows are
    not kept in memory): device counters summed over their time, host figures weighted by
    each interval's length, the highest avg10 of each pressure."""

    HOST_MEANS = (
        *[f"cpu_{f}_pct" for f in CPU_FIELDS],
        "engine_cpu_pct",
        "aggregate_cpu_pct",
        "process_cpu_pct",
        *[c for c in PSI_COLUMNS if c.endswith("_pct")],
    )
    HOST_MAXES = tuple(c for c in PSI_COLUMNS if c.endswith("_avg10"))
    # The engine's (IO and aggregation threads') and the process's CPU are means over the same
    # intervals (those where all are known), so that the process's less the engine's is the
    # front end's share; the process's alone where the engine's is known in none.
    CPU_PAIR = ("engine_cpu_pct", "aggregate_cpu_pct", "process_cpu_pct")

    def __init__(self) -> None:
        self._devices: dict[str, dict[str, Any]] = {}
        self._means = {c: WeightedMean() for c in self.HOST_MEANS}
        self._pair_means = {c: WeightedMean() for c in self.CPU_PAIR}
        self._maxes: dict[str, float | None] = dict.fromkeys(self.HOST_MAXES)
        self.host_rows = 0

    def add(self, dev_rows: list[dict[str, Any]], host_rows: list[dict[str, Any]]) -> None:
        for r in dev_rows:
            if r.get("phase") != "measure":
                continue
            acc = self._devices.setdefault(
                r["dev"],
                {
                    "device": r["device"],
                    "dev": r["dev"],
                    "kind": r["kind"],
                    "depth": r["depth"],
                    "sample_ns": 0,
                    **{c: 0 for c in DEVICE_COUNTERS},
                },
            )
            acc["sample_ns"] += int(r["sample_ns"])
            for c in DEVICE_COUNTERS:
                acc[c] += int(r.get(c) or 0)
        for r in host_rows:
            if r.get("phase") != "measure":
                continue
            self.host_rows += 1
            for c in self.HOST_MEANS:
                if r.get(c) is not None:
                    self._means[c].add(r[c], r["sample_ns"])
            if all(r.get(c) is not None for c in self.CPU_PAIR):
                for c in self.CPU_PAIR:
                    self._pair_means[c].add(r[c], r["sample_ns"])
            for c in self.HOST_MAXES:
                v = r.get(c)
                if v is not None:
                    self._maxes[c] = v if self._maxes[c] is None else max(self._maxes[c], v)

    def devices(self) -> list[dict[str, Any]]:
        out = []
        for acc in self._devices.values():
            dt_s = acc["sample_ns"] / 1e9
            zeros = (0,) * len(DEVICE_COUNTERS)
            figures = device_figures(zeros, tuple(acc[c] for c in DEVICE_COUNTERS), dt_s)
            out.append(
                {
                    "device": acc["device"],
                    "dev": acc["dev"],
                    "kind": acc["kind"],
                    "depth": acc["depth"],
                    "seconds": dt_s,
                    "reads": acc["reads"],
                    "writes": acc["writes"],
                    **{k: figures[k] for k in DEVICE_RATES},
                }
            )
        return sorted(out, key=lambda d: (d["depth"], d["device"]))

    def host(self) -> dict[str, Any] | None:
        if not self.host_rows:
            return None
        out: dict[str, Any] = {c: m.value for c, m in self._means.items()}
        if all(m.weight for m in self._pair_means.values()):
            out.update({c: m.value for c, m in self._pair_means.items()})
        out.update({f"{c}_max": v for c, v in self._maxes.items()})
        return out


def _ratio(back: float | None, front: float | None) -> float | None:
    return back / front if back is not None and front else None


RATE_KEYS = ("read_iops", "write_iops", "read_mbps", "write_mbps")


def _back_row(d: dict[str, Any], front: dict[str, Any]) -> dict[str, Any]:
    row = {
        "side": "back end",
        "name": d["device"],
        "depth": d["depth"],
        "targets": d.get("targets"),
        **{k: d.get(k) for k in RATE_KEYS},
    }
    for k in RATE_KEYS:
        row[f"{k}_ratio"] = _ratio(d.get(k), front.get(k))
    row["util_pct"] = d.get("util_pct")
    return row


def front_vs_back(
    total: dict[str, Any],
    devices: list[dict[str, Any]],
    targets: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The seed 001 table: tilemark's IOPS and MB/s (front end) beside each device's (back
    end), with back/front ratios (1.0: every IO reached the device; < 1: a cache absorbed
    some; > 1: the device did more, such as a RAID's write penalty or other tenants).

    With several targets (summary["targets"]) each target's front end comes with the devices
    serving it, their ratios against what tilemark sent to the targets they serve (a device
    under two targets, such as the disk under two files, is set against both together)."""
    rows = [
        {
            "side": "front end",
            "name": "tilemark",
            "depth": None,
            "targets": None,
            **{k: total.get(k) for k in RATE_KEYS},
        }
    ]
    if not targets or len(targets) < 2:
        return rows + [_back_row(d, total) for d in devices]
    fronts = {t["name"]: t for t in targets}
    shown: set[str] = set()
    for t in targets:
        rows.append(
            {
                "side": "front end",
                "name": f"tilemark: {t['name']}",
                "depth": None,
                "targets": [t["name"]],
                **{k: t.get(k) for k in RATE_KEYS},
            }
        )
        for d in devices:
            served = d.get("targets") or []
            if t["name"] not in served or d["dev"] in shown:
                continue
            shown.add(d["dev"])
            front = {
                k: sum(fronts[n].get(k) or 0.0 for n in served if n in fronts) for k in RATE_KEYS
            }
            rows.append(_back_row(d, front))
    # Devices that serve no target by name (telemetry without target names).
    rows += [_back_row(d, total) for d in devices if d["dev"] not in shown]
    return rows


def tool_bound(
    summary: dict[str, Any], host: dict[str, Any] | None, cpu_count: int | None = None
) -> dict[str, Any]:
    """Whether a run measured the host rather than the storage: its CPUs were more than
    TOOL_BOUND_CPU_PCT busy on average over the measurement window, or open-loop streams
    issued more than TOOL_BOUND_LATE_SHARE of their IOs more than 1 ms after their time (the
    engine fell behind its schedule). One reason per cause: the late streams are counted, and
    the worst one named, however many there are."""
    reasons = []
    busy = (host or {}).get("cpu_busy_pct")
    if busy is not None and busy > TOOL_BOUND_CPU_PCT:
        reasons.append(f"host CPU {busy:.0f}% busy on average (above {TOOL_BOUND_CPU_PCT:.0f}%)")
    late_streams: list[tuple[float, str]] = []
    open_streams = 0
    for s in summary.get("streams") or []:
        if s.get("arrival") != "open":
            continue
        open_streams += 1
        ops = sum(int((s.get(k) or {}).get("ops", 0)) for k in ("read", "write"))
        late = int(s.get("ios_issued_late") or 0)
        if ops and late / ops > TOOL_BOUND_LATE_SHARE:
            late_streams.append((100 * late / ops, str(s.get("name"))))
    if late_streams:
        share, name = max(late_streams)
        if len(late_streams) == 1:
            reasons.append(
                f"stream {name} issued {share:.1f}% of its IOs more than 1 ms late (the engine "
                "fell behind its schedule)"
            )
        else:
            reasons.append(
                f"{len(late_streams)} of {open_streams} open-loop streams issued more than "
                f"{100 * TOOL_BOUND_LATE_SHARE:g}% of their IOs more than 1 ms late, worst "
                f"{name} {share:.1f}% (the engine fell behind its schedule)"
            )
    return {"tool_bound": bool(reasons), "reasons": reasons}


def tool_bound_line(verdict: dict[str, Any] | None) -> str | None:
    """The tool-bound verdict of a run as one line (None when it was not)."""
    reasons = (verdict or {}).get("reasons") or []
    if not (verdict or {}).get("tool_bound") or not reasons:
        return None
    return (
        "tool-bound: "
        + "; ".join(r.rstrip(".") for r in reasons)
        + ": the numbers describe the host, not the storage"
    )


def back_end(summary: dict[str, Any]) -> dict[str, Any]:
    """What the devices serving the targets directly (depth 0) did over the measurement
    window, for tables of many runs (sweeps, curves): device_iops, device_read_iops,
    device_write_iops, device_mbps (sums) and device_util (the busiest one's %); all None
    for a run without device telemetry."""
    devices = [
        d for d in ((summary.get("telemetry") or {}).get("devices") or []) if d["depth"] == 0
    ]
    if not devices:
        return dict.fromkeys(
            ("device_iops", "device_read_iops", "device_write_iops", "device_mbps", "device_util")
        )
    read = sum(d.get("read_iops") or 0.0 for d in devices)
    write = sum(d.get("write_iops") or 0.0 for d in devices)
    mbps = sum((d.get("read_mbps") or 0.0) + (d.get("write_mbps") or 0.0) for d in devices)
    return {
        "device_iops": read + write,
        "device_read_iops": read,
        "device_write_iops": write,
        "device_mbps": mbps,
        "device_util": max(d.get("util_pct") or 0.0 for d in devices),
    }


def summarize_telemetry(
    summary: dict[str, Any], totals: Totals, sampled: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The run summary's telemetry: per-device totals (with the names of the targets each
    serves, from `sampled`: Telemetry.devices), front end vs back end, host totals."""
    devices = totals.devices()
    names = [t.get("name") for t in summary.get("targets") or []]
    serves = {d["dev"]: d.get("targets") or [] for d in sampled or []}
    for d in devices:
        d["targets"] = [names[i] for i in serves.get(d["dev"], []) if i < len(names)]
    return {
        "devices": devices,
        "front_vs_back": front_vs_back(summary.get("total") or {}, devices, summary.get("targets")),
        "host": totals.host(),
    }
