"""Trace replay, tilemark vs fio: the same traces replayed by `tilemark replay` and by fio's
`read_iolog` (the trace written as an iolog v3), alternately, on a RAM-backed loop device and on
the same device behind a cgroup v1 blkio throttle (design.md budget: achieved rate within 0.5%
of the trace's, issue lateness p99 <= 50 us at 20,000 IOPS on the RAM disk).

Traces (bench/work/replay/, regenerated every run; times in whole microseconds, which is what
an iolog v3 holds, so both tools get the same schedule):

- `constant250`: 4 KiB IOs (70% reads, random over 512 MiB) every 4 ms, 60 s (15,000 IOs;
  --quick: 20 s). fio's users report replay 2% slow at 250 IOPS (axboe/fio#772).
- `bursty`: bursts of 1,000-3,000 IOs 50 us apart (20,000 IOPS) separated by idle gaps of
  0.2-1 s, 20 s (--quick: 8 s). Gaps made fio replay at half speed (axboe/fio#1537).
- `pg` (--pg): the block requests of pgbench (PostgreSQL, TPC-B-like, 4 clients, 15 s) on ext4
  over a RAM-backed loop device, captured from the kernel's block_rq_issue/complete events:
  8 KiB data pages, WAL writes with flushes and FUA, checkpoints. Needs PostgreSQL's tools.

Both tools are measured the same way, from outside: a tracefs instance of this script's own
records io_uring_submit_req (both tools use io_uring) with the monotonic trace clock and the
submitting process's tgid. A run's k-th data IO submitted is matched with the trace's k-th data
IO: its lateness is T_k - t_k - min_j(T_j - t_j) (the clocks aligned by the most punctual
IO), the achieved rate (n - 1) / (T_last - T_0) against the trace's (n - 1) / (t_last - t_0).
tilemark's own replay section (lateness from its engine clock) and fio's job runtime are
recorded beside them.

Method: root (loop devices, cgroups, tracefs). Runs alternate between the tools, the tool that
goes first flips every repetition and case; sync() and 1 s settle before every run; load and
pressure (PSI) are recorded before and after every run. Results: bench/results/<date>-<time>-
<host>-replay.json (every run) and .md (the table). Exit status 0 when tilemark met both budgets on
every case of the RAM disk, 1 when not, 2 when the benchmark cannot run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tmbench as tb
from tmbench import SetupError, median_or_none

REPO = tb.REPO
WORK = tb.WORK / "replay"
TRACES = WORK / "traces"
RESULTS = tb.RESULTS_DIR
TRACEFS = Path("/sys/kernel/tracing")
BLKIO = Path("/sys/fs/cgroup/blkio")
RAM_IMAGE = Path("/dev/shm/tilemark-bench-replay.img")
RAM_SIZE = 1 << 30
EXTENT = 512 << 20  # synthetic traces' offsets lie below this
THROTTLE_IOPS = 5000  # read and write IOPS of the throttled device
SCHEMA = "tilemark-bench-replay/1"
BUDGET_RATE_PCT = 0.5
BUDGET_LATE_P99_US = 50.0


# ---------------------------------------------------------------------------------------------
# Traces


def _write(path: Path, rows: dict[str, list], source: str) -> Path:
    from tilemark.trace.schema import TraceMeta, TraceWriter

    with TraceWriter(path, TraceMeta(source=source, device_size=EXTENT)) as w:
        w.write(rows)
    return path


def _io(rng: random.Random, rows: dict[str, list], t_us: int) -> None:
    rows["issue_ns"].append(t_us * 1000)
    rows["op"].append("read" if rng.random() < 0.7 else "write")
    rows["offset"].append(rng.randrange(0, EXTENT // 4096) * 4096)
    rows["size"].append(4096)


def constant_trace(seconds: float) -> Path:
    rng, rows = random.Random(250), {"issue_ns": [], "op": [], "offset": [], "size": []}
    for k in range(int(seconds * 250)):
        _io(rng, rows, k * 4000)
    return _write(TRACES / "constant250.parquet", rows, "synthetic:constant250")


def bursty_trace(seconds: float) -> Path:
    rng, rows = random.Random(20000), {"issue_ns": [], "op": [], "offset": [], "size": []}
    t = 0
    while t < seconds * 1e6:
        for _ in range(rng.randrange(1000, 3000)):
            _io(rng, rows, t)
            t += 50
        t += rng.randrange(200, 1000) * 1000
    return _write(TRACES / "bursty.parquet", rows, "synthetic:bursty")


def write_iolog(trace: Path, out: Path) -> int:
    """The trace as a fio iolog v3 (timestamps in microseconds, as fio 3.31+ reads them; the
    first IO at 1 us, because fio takes no delay before the entry after a 0 timestamp); FUA is
    lost (an iolog cannot say it). Returns the data IOs written."""
    from tilemark.trace.schema import open_trace

    table = open_trace(trace).table(["issue_ns", "op", "offset", "size"]).to_pylist()
    action = {"read": "read", "write": "write", "flush": "sync", "discard": "trim"}
    t0 = table[0]["issue_ns"]
    with open(out, "w") as f:
        f.write("fio version 3 iolog\n0 dev add\n0 dev open\n")
        for r in table:
            f.write(f"{(r['issue_ns'] - t0) // 1000 + 1} dev {action[r['op']]} ")
            f.write(f"{r['offset'] if r['op'] != 'flush' else 0} {r['size']}\n")
        f.write(f"{(table[-1]['issue_ns'] - t0) // 1000 + 2} dev close\n")
    return sum(r["op"] in ("read", "write") for r in table)


def inflight_cap(trace: Path) -> int:
    """tilemark's cap on the trace's IOs in flight (fio gets it as --iodepth)."""
    from tilemark.trace import iolist
    from tilemark.trace.replay import inflight_cap as cap
    from tilemark.trace.schema import open_trace
    from tilemark.trace.selection import Selection

    scan = iolist.scan(open_trace(trace), Selection(), None, completions=True)
    return cap(scan.max_size, max(g.max_inflight for g in scan.groups.values()))


def data_times_us(trace: Path) -> list[float]:
    """Issue times (us) of the trace's reads and writes."""
    from tilemark.trace.schema import open_trace

    rows = open_trace(trace).table(["issue_ns", "op"]).to_pylist()
    return [r["issue_ns"] / 1000 for r in rows if r["op"] in ("read", "write")]


# ---------------------------------------------------------------------------------------------
# Measuring from outside: io_uring submissions per process


class Submissions:
    """io_uring_submit_req events (with tgid, monotonic clock) of one process and its threads
    in a tracefs instance. The kernel keeps only that process's events (set_event_pid, with
    event-fork for the threads it starts), so other processes' io_uring traffic on a shared
    machine neither fills the buffer nor pushes the run's first events out of it; a full
    buffer drops new events rather than old ones, and any drop is reported."""

    def __init__(self) -> None:
        if not (TRACEFS / "instances").is_dir():
            raise SetupError(f"tracefs is not mounted at {TRACEFS}")
        self.dir = TRACEFS / "instances" / f"tilemark-bench-replay-{os.getpid()}"
        self.lost_before = 0

    def __enter__(self) -> Submissions:
        self.dir.mkdir()
        (self.dir / "trace_clock").write_text("mono")
        (self.dir / "buffer_size_kb").write_text("65536")
        (self.dir / "options" / "record-tgid").write_text("1")
        (self.dir / "options" / "event-fork").write_text("1")
        (self.dir / "options" / "overwrite").write_text("0")
        event = self.dir / "events" / "io_uring" / "io_uring_submit_req"
        (event / "filter").write_text('op_str == "READ" || op_str == "WRITE"')
        return self

    def start(self, pid: int) -> None:
        """Record process `pid` (and the threads and children it starts from now on)."""
        (self.dir / "trace").write_text("")  # clears the buffer
        self.lost_before = self.lost()
        (self.dir / "set_event_pid").write_text(f"{pid}\n")
        (self.dir / "events" / "io_uring" / "io_uring_submit_req" / "enable").write_text("1")

    def lost(self) -> int:
        """Events the buffer could not take (overrun or dropped), over every CPU."""
        return tb.tracefs_lost_events(self.dir)

    def stop(self, tgid: int) -> list[float]:
        """Submission times (us, CLOCK_MONOTONIC) of process `tgid`'s reads and writes."""
        (self.dir / "events" / "io_uring" / "io_uring_submit_req" / "enable").write_text("0")
        (self.dir / "set_event_pid").write_text("")
        times = []
        with open(self.dir / "trace") as f:
            for line in f:
                if "io_uring_submit_req:" not in line:
                    continue
                head = line.split("io_uring_submit_req:")[0]
                tgid_field = head[head.index("(") + 1 : head.index(")")].strip()
                if tgid_field.isdigit() and int(tgid_field) == tgid:
                    stamp = head.split("]")[-1].split()[-1].rstrip(":")
                    times.append(float(stamp) * 1e6)
        return sorted(times)

    def __exit__(self, *exc: object) -> None:
        tb.rmdir_retrying(self.dir)


def timing(submits: list[float], trace_us: list[float]) -> dict[str, Any]:
    """A run's submissions against the trace: rank-matched lateness, achieved rate."""
    n = min(len(submits), len(trace_us))
    out: dict[str, Any] = {"submitted": len(submits), "trace_ios": len(trace_us)}
    if n < 2:
        return out
    # The run's clock is aligned with the trace's by the IO that came closest to its time:
    # lateness is measured from the most punctual IO, the same rule for both tools.
    offset = min(submits[k] - trace_us[k] for k in range(n))
    late = sorted(submits[k] - trace_us[k] - offset for k in range(n))
    s0, t0 = submits[0], trace_us[0]
    span, trace_span = submits[n - 1] - s0, trace_us[n - 1] - t0
    achieved, wanted = (n - 1) / (span / 1e6), (n - 1) / (trace_span / 1e6)

    def pct(p: float) -> float:
        return late[min(n - 1, int(p / 100 * n))]

    return out | {
        "achieved_iops": achieved,
        "trace_iops": wanted,
        "rate_error_pct": 100 * (achieved / wanted - 1),
        "span_s": span / 1e6,
        "trace_span_s": trace_span / 1e6,
        "late_p50_us": pct(50),
        "late_p99_us": pct(99),
        "late_max_us": late[-1],
        "late_mean_us": statistics.fmean(late),
        "late_min_us": late[0],
    }


# ---------------------------------------------------------------------------------------------
# Devices


@contextmanager
def throttle(dev: str, iops: int):
    """A cgroup v1 blkio group limiting reads and writes of `dev` to `iops` each."""
    if not (BLKIO / "blkio.throttle.read_iops_device").exists():
        raise SetupError("cgroup v1 blkio throttling is not available")
    cg = BLKIO / f"tilemark-bench-replay-{os.getpid()}"
    cg.mkdir()
    numbers = tb.run_text(["stat", "-L", "-c", "%t:%T", dev]) or "0:0"
    major, minor = (int(x, 16) for x in numbers.split(":"))
    try:
        for kind in ("read", "write"):
            (cg / f"blkio.throttle.{kind}_iops_device").write_text(f"{major}:{minor} {iops}\n")
        yield cg
    finally:
        tb.rmdir_retrying(cg)


def held(cg: Path | None, cmd: list[str], pin: int | None = None) -> list[str]:
    """`cmd` run inside cgroup `cg` (if any) and on CPU `pin` (if any), once a line arrives on
    its stdin: its pid is known, and traced, before it does anything. Every wrapper execs, so
    the pid stays the tool's."""
    if pin is not None:
        cmd = ["taskset", "-c", str(pin), *cmd]
    join = f'echo $$ > "{cg}/cgroup.procs" && ' if cg is not None else ""
    return ["sh", "-c", join + 'read _ && exec "$@"', "sh", *cmd]


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class Run:
    tool: str
    case: str
    device: str
    rep: int
    cmd: list[str]
    exit_code: int
    wall_s: float
    timing: dict[str, Any]
    own: dict[str, Any] = field(default_factory=dict)  # the tool's own report
    load_before: dict[str, Any] = field(default_factory=dict)
    load_after: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def tilemark_cmd(tm: str, trace: Path, dev: str) -> list[str]:
    return [tm, "replay", str(trace), "--target", dev, "--destroy-data", dev, "--remap", "off",
            "--results", str(WORK / "results"), "--json"]  # fmt: skip


def fio_cmd(fio: str, iolog: Path, dev: str, out: Path, iodepth: int) -> list[str]:
    return [fio, "--name=replay", "--ioengine=io_uring", "--direct=1",
            f"--iodepth={iodepth}", f"--read_iolog={iolog}", f"--replay_redirect={dev}",
            "--thread", "--output-format=json", f"--output={out}"]  # fmt: skip


def run_one(
    cmd: list[str], sub: Submissions, trace_us: list[float], cg: Path | None, pin: int | None
) -> tuple[int, float, dict[str, Any], str, str]:
    tb.settle()
    proc = subprocess.Popen(held(cg, cmd, pin), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=REPO)  # fmt: skip
    try:
        sub.start(proc.pid)
        started = time.monotonic()
        out, err = proc.communicate("go\n")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    wall = time.monotonic() - started
    submits = sub.stop(proc.pid)
    lost = sub.lost() - sub.lost_before
    return proc.returncode, wall, timing(submits, trace_us) | {"events_lost": lost}, out, err


def tilemark_own(stdout: str) -> dict[str, Any]:
    doc = json.loads(stdout[stdout.index("{") :])
    section = doc["summary"]["replay"]
    total = section["total"]
    late = total.get("lateness") or {}
    return {
        "run_dir": doc["run_dir"],
        "issued": total["issued"],
        "skipped": total["skipped"],
        "achieved_iops": total["achieved_iops"],
        "intended_iops": total["intended_iops"],
        "rate_error_pct": total["rate_error_pct"],
        "late_p50_us": late.get("p50_us"),
        "late_p99_us": late.get("p99_us"),
        "late_max_us": late.get("max_us"),
        "verdict": section["verdict"],
    }


def fio_own(path: Path) -> dict[str, Any]:
    job = json.loads(path.read_text())["jobs"][0]
    ios = job["read"]["total_ios"] + job["write"]["total_ios"]
    return {
        "job_runtime_ms": job["job_runtime"],
        "ios": ios,
        "iops": ios / (job["job_runtime"] / 1000) if job["job_runtime"] else None,
        "error": job.get("error"),
    }


def measure(args: argparse.Namespace, dev: str, cg: Path | None, device: str, traces) -> list[Run]:
    runs: list[Run] = []
    with Submissions() as sub:
        for ci, (case, trace, iolog, trace_us, depth) in enumerate(traces):
            for rep in range(args.reps):
                order = ("tilemark", "fio") if (rep + ci) % 2 == 0 else ("fio", "tilemark")
                for tool in order:
                    fio_json = WORK / f"fio-{case}-{device}-{rep}.json"
                    cmd = (
                        tilemark_cmd(args.tilemark, trace, dev)
                        if tool == "tilemark"
                        else fio_cmd(args.fio, iolog, dev, fio_json, depth)
                    )
                    before = tb.load_now()
                    code, wall, tim, out, err = run_one(cmd, sub, trace_us, cg, args.pin)
                    run = Run(tool, case, device, rep, cmd, code, wall, tim, {}, before,
                              tb.load_now())  # fmt: skip
                    try:
                        run.own = tilemark_own(out) if tool == "tilemark" else fio_own(fio_json)
                    except (ValueError, KeyError, OSError) as e:
                        run.error = f"{type(e).__name__}: {e}; stderr: {err.strip()[-400:]}"
                    if code != 0:
                        run.error = (run.error or "") + f" exit {code}: {err.strip()[-400:]}"
                    if tim.get("events_lost"):
                        run.error = (run.error or "") + f" tracefs lost {tim['events_lost']} events"
                    runs.append(run)
                    print(progress(run), flush=True)
    return runs


def progress(r: Run) -> str:
    t = r.timing
    if "achieved_iops" not in t:
        return f"{r.device:9} {r.case:11} {r.tool:8} rep {r.rep}: no timing ({r.error})"
    return (
        f"{r.device:9} {r.case:11} {r.tool:8} rep {r.rep}: {t['submitted']:,}/{t['trace_ios']:,} "
        f"IOs, rate {t['rate_error_pct']:+.3f}%, lateness p50 {t['late_p50_us']:.0f} "
        f"p99 {t['late_p99_us']:.0f} max {t['late_max_us']:.0f} us, cpu some "
        f"{r.load_before.get('cpu_some_avg10')}%" + (f" ERROR {r.error}" if r.error else "")
    )


# ---------------------------------------------------------------------------------------------
# PostgreSQL trace (--pg)


def pg_trace(seconds: int) -> Path | None:
    """pgbench's block requests on ext4 over a RAM-backed loop device, as a tilemark trace."""
    import pg_trace  # bench/pg_trace.py

    try:
        return pg_trace.capture(TRACES / "pg.parquet", WORK / "pg", seconds)
    except pg_trace.CaptureError as e:
        print(f"replay bench: no pg trace: {e}", file=sys.stderr)
        return None


# ---------------------------------------------------------------------------------------------
# Summary and report


def summarize(runs: list[Run]) -> list[dict[str, Any]]:
    rows = []
    keys = dict.fromkeys((r.device, r.case, r.tool) for r in runs)
    for device, case, tool in keys:
        mine = [r for r in runs if (r.device, r.case, r.tool) == (device, case, tool)]
        t = [r.timing for r in mine]
        errors = [abs(x["rate_error_pct"]) for x in t if "rate_error_pct" in x]
        rows.append(
            {
                "device": device,
                "case": case,
                "tool": tool,
                "reps": len(mine),
                "failed": sum(1 for r in mine if r.error),
                "ios": median_or_none([x.get("submitted") for x in t]),
                "trace_ios": median_or_none([x.get("trace_ios") for x in t]),
                "trace_iops": median_or_none([x.get("trace_iops") for x in t]),
                "rate_error_pct": median_or_none([x.get("rate_error_pct") for x in t]),
                "rate_error_worst_pct": max(errors) if errors else None,
                "span_ratio": median_or_none(
                    [x["span_s"] / x["trace_span_s"] for x in t if x.get("trace_span_s")]
                ),
                "late_p50_us": median_or_none([x.get("late_p50_us") for x in t]),
                "late_p99_us": median_or_none([x.get("late_p99_us") for x in t]),
                "late_p99_worst_us": max((x.get("late_p99_us") or 0) for x in t),
                "late_max_us": median_or_none([x.get("late_max_us") for x in t]),
                "own_late_p99_us": median_or_none([r.own.get("late_p99_us") for r in mine]),
                "own_rate_error_pct": median_or_none([r.own.get("rate_error_pct") for r in mine]),
                "cpu_some_avg10": median_or_none(
                    [r.load_before.get("cpu_some_avg10") for r in mine]
                ),
                "io_some_avg10": median_or_none([r.load_before.get("io_some_avg10") for r in mine]),
            }
        )
    return rows


def budgets(rows: list[dict[str, Any]]) -> list[str]:
    """Failed budgets of tilemark on the RAM disk, one sentence each."""
    failed = []
    for r in rows:
        if r["tool"] != "tilemark" or r["device"] != "ramdisk":
            continue
        if r["rate_error_worst_pct"] is None or r["rate_error_worst_pct"] > BUDGET_RATE_PCT:
            failed.append(f"{r['case']}: achieved rate off by {r['rate_error_worst_pct']}%")
        if r["case"] == "bursty" and (r["late_p99_us"] or 1e9) > BUDGET_LATE_P99_US:
            failed.append(f"bursty: lateness p99 {r['late_p99_us']:.0f} us (median of reps)")
    return failed


def _f(v: float | None, fmt: str) -> str:
    return "-" if v is None else format(v, fmt)


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# Trace replay: tilemark vs fio ({doc['machine']['date']})",
        "",
        f"`{' '.join(doc['argv'])}` on {doc['machine']['hostname']}: kernel "
        f"{doc['machine']['kernel']}, {doc['machine']['cpus']} CPUs, "
        f"{doc['machine']['fio_version']}, tilemark {doc['machine']['tilemark_version']}. "
        "Devices: `ramdisk` = loop device "
        f"(direct IO) over {RAM_SIZE >> 20} MiB in /dev/shm; `throttled` = the same device with "
        f"reads and writes limited to {THROTTLE_IOPS:,} IOPS each (cgroup v1 blkio). "
        f"{doc['reps']} repetitions, tools alternating; medians over repetitions.",
        "",
        "Measured from outside, the same way for both tools: io_uring submissions (tracefs "
        "`io_uring_submit_req`, monotonic clock) rank-matched with the trace's IOs. rate = "
        "achieved (n-1)/span vs the trace's; lateness = T_k - t_k - min_j(T_j - t_j). `own` = "
        "tilemark's replay section (its engine clock). cpu/io = PSI some avg10 before the runs.",
        "",
        "| device | case | tool | IOs | trace IOPS | rate err % (worst) | span ratio | late p50 us "
        "| late p99 us (worst) | late max us | own p99 us | cpu/io PSI % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["summary"]:
        lines.append(
            f"| {r['device']} | {r['case']} | {r['tool']} | {_f(r['ios'], ',.0f')} "
            f"| {_f(r['trace_iops'], ',.1f')} | {_f(r['rate_error_pct'], '+.3f')} "
            f"({_f(r['rate_error_worst_pct'], '.3f')}) | {_f(r['span_ratio'], '.4f')} "
            f"| {_f(r['late_p50_us'], ',.0f')} | {_f(r['late_p99_us'], ',.0f')} "
            f"({_f(r['late_p99_worst_us'], ',.0f')}) | {_f(r['late_max_us'], ',.0f')} "
            f"| {_f(r['own_late_p99_us'], ',.0f')} | {_f(r['cpu_some_avg10'], '.0f')}/"
            f"{_f(r['io_some_avg10'], '.0f')} |"
        )
    verdict = doc["budget_failures"]
    lines += [
        "",
        "Budgets (tilemark, RAM disk): achieved rate within "
        f"{BUDGET_RATE_PCT}% of the trace's in every repetition of every case; lateness p99 <= "
        f"{BUDGET_LATE_P99_US:g} us on `bursty` (20,000 IOPS bursts): "
        + ("**pass**" if not verdict else "**fail**: " + "; ".join(verdict)),
        "",
    ]
    for note in doc.get("notes", []):
        lines.append(f"- {note}")
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--quick", action="store_true", help="constant 20 s, bursty 8 s")
    p.add_argument("--pg", action="store_true", help="also capture and replay a pgbench trace")
    p.add_argument("--pg-seconds", type=int, default=15)
    p.add_argument("--devices", default="ramdisk,throttled")
    p.add_argument("--cases", default="constant250,bursty,pg")
    p.add_argument("--fio", default=tb.DEFAULT_FIO)
    p.add_argument("--tilemark", default=str(REPO / ".venv" / "bin" / "tilemark"))
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--pin",
        type=int,
        metavar="CPU",
        help="run both tools, and the kernel's unbound workqueues (the loop device's worker), "
        "on this CPU (a system-wide setting, restored at exit; bench/README.md)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        if os.geteuid() != 0:
            raise SetupError("needs root (loop devices, cgroups, tracefs)")
        if not shutil.which(args.fio):
            raise SetupError(f"fio not found at {args.fio} (make system-deps)")
        shutil.rmtree(WORK, ignore_errors=True)
        TRACES.mkdir(parents=True)
        cases = set(args.cases.split(","))
        made: list[tuple[str, Path]] = []
        if "constant250" in cases:
            made.append(("constant250", constant_trace(20 if args.quick else 60)))
        if "bursty" in cases:
            made.append(("bursty", bursty_trace(8 if args.quick else 20)))
        if args.pg and "pg" in cases:
            pg = pg_trace(args.pg_seconds)
            if pg is not None:
                made.append(("pg", pg))
        traces = []
        for case, trace in made:
            iolog = TRACES / f"{case}.iolog"
            write_iolog(trace, iolog)
            traces.append((case, trace, iolog, data_times_us(trace), inflight_cap(trace)))
        runs: list[Run] = []
        # Our own image: tb.py may run beside us.
        with tb.ramdisk(RAM_SIZE, RAM_IMAGE) as ram, tb.pinned_workqueues(args.pin):
            dev = ram["device"]
            with open(dev, "r+b") as f:  # no accidental filesystem signature in random data
                f.write(bytes(128 << 10))
            for device in args.devices.split(","):
                if device == "ramdisk":
                    runs += measure(args, dev, None, device, traces)
                elif device == "throttled":
                    with throttle(dev, THROTTLE_IOPS) as cg:
                        runs += measure(args, dev, cg, device, traces)
    except SetupError as e:
        print(f"replay bench: {e}", file=sys.stderr)
        return 2
    rows = summarize(runs)
    settings = tb.Settings(args.tilemark, args.fio, RAM_SIZE, 0, 0, args.reps, target=dev)
    doc = {
        "schema": SCHEMA,
        "argv": ["bench/replay.py", *(argv if argv is not None else sys.argv[1:])],
        "reps": args.reps,
        "machine": tb.machine_notes(settings, {"ramdisk": ram}),
        "traces": {
            c: {"path": str(t), "data_ios": len(us), "inflight_cap": depth}
            for c, t, _, us, depth in traces
        },
        "summary": rows,
        "runs": [r.__dict__ for r in runs],
        "budget_failures": budgets(rows),
        "notes": [
            "fio replays FUA writes as plain writes (an iolog cannot say FUA); tilemark "
            "writes them through an O_DSYNC file.",
            "fio --iodepth = tilemark's cap on a replayed stream's IOs in flight for that "
            "trace (`traces[].inflight_cap`); fio --thread.",
            *(
                [f"pinned: both tools (taskset) and the unbound workqueues on CPU {args.pin}"]
                if args.pin is not None
                else []
            ),
        ],
    }
    json_path, _ = tb.write_results(args.out, "replay", doc, markdown(doc))
    print(markdown(doc))
    print(f"results: {json_path}, .md")
    return 1 if doc["budget_failures"] or any(r.error for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
