"""fio's flow control (`flow`, `flow_sleep`) run by fio and by tilemark, side by side, with what
the device saw (issue 27: docs/fio.md "Jobs that pace or end each other").

Two questions, one case each:

- `--case sleep10`: butterfly.fio (two psync readers of equal flow weight) with `flow_sleep=10`
  added, on a RAM disk (a loop device over tmpfs). Runs fio and tilemark, and tilemark once per
  engine build given (`--build NAME=PATH.so`, put in place of python/tilemark/_engine.abi3.so
  before each run, as engine_cpu_ab.py does), alternating, REPS times. Figures per run: IOPS
  (both jobs), the first job's p50/p99 latency, and the CPU time the tool's process used
  (rusage of the child: Python's start, ~0.4 s, is in tilemark's).
- `--case flowfio`: flow.fio (libaio, iodepth 256, a sequential writer of weight 1 and a random
  reader of weight 8, flow_sleep 1000 us) on a file rig: a file per tool in --file-dir, both
  written in full before the first run (fio lays out a file for a write-only first job with
  fallocate alone, and reads of unwritten extents never reach the disk). Every run is traced
  at the block layer (a tracefs instance of its own: block_rq_issue and block_rq_complete of
  the file's disk, kept when they fall in the file's extents), which gives per run the
  device's read and write latency, how many of the writes were at the device together with
  reads, and how far each write burst came after the read burst before it. `--fio-slack NS`
  runs fio a second time per repetition with that timer slack (prctl PR_SET_TIMERSLACK,
  which its threads inherit; fio's usleep(flow_sleep) then sleeps as exactly as tilemark's
  engine threads do, which set 1 ns). `--fio-variant NAME=OPT=VALUE,...` runs fio once more
  per repetition with those options added (e.g. `batch=iodepth_batch_submit=16`),
  `--tilemark-variant NAME=ARGS` tilemark with those arguments (e.g. `uring=--backend uring`),
  and `--unpaced` every tool once more on the example without its flow lines.
  `--trace-sleeps` traces fio's clock_nanosleep calls (how long usleep(flow_sleep) slept).

    sudo .venv/bin/python bench/flow_pace.py --examples /tmp/fiosrc/examples --case flowfio \\
        --reps 6 --fio-slack 1 --fio-variant batch16=iodepth_batch_submit=16
    sudo .venv/bin/python bench/flow_pace.py --examples /tmp/fiosrc/examples --case sleep10 \\
        --reps 5 --build base=/tmp/base.so --build new=/tmp/new.so

Results: bench/results/<date>-<time>-<host>-flow-<case>.{json,md}; docs/fio.md reads them.
"""

from __future__ import annotations

import argparse
import ctypes
import glob
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import fio_jobs
import tmbench

ENGINE = tmbench.REPO / "python/tilemark/_engine.abi3.so"
TRACE = Path("/sys/kernel/tracing/instances/tilemark-flow-pace")
BLOCK_EVENTS = ("block_rq_issue", "block_rq_complete")
SLEEP_EVENTS = ("sys_enter_clock_nanosleep", "sys_exit_clock_nanosleep")
RAM_IMAGE = Path("/dev/shm/tilemark-flow-pace-ram.img")
PR_SET_TIMERSLACK = 29
# Reads issued within this of each other are one burst (a flow-held reader issues its share at
# once, then waits flow_sleep).
BURST_GAP_S = 100e-6


def job_text(args: argparse.Namespace, name: str, target: str, extra: list[str]) -> str:
    """fio_jobs.py's runnable form of the example, with `extra` option lines in a [global]
    section put after the example's own (so they are not overridden by it) and before its jobs."""
    text = fio_jobs.runnable(args.examples / name, target, args.size, args.runtime, args.ramp)
    if not extra:
        return text
    first_job = re.search(r"(?m)^\[(?!global\])", text)
    assert first_job is not None, name
    at = first_job.start()
    return text[:at] + "[global]\n" + "\n".join(extra) + "\n\n" + text[at:]


def _child_cpu() -> float:
    t = os.times()
    return t.children_user + t.children_system


def run_fio(args: argparse.Namespace, path: Path, work: Path, slack: int | None) -> dict[str, Any]:
    def preexec() -> None:
        if slack is not None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(slack), 0, 0, 0)

    cmd = [args.fio, "--output-format=json", "--lat_percentiles=1", "--verify_state_save=0"]
    cpu = _child_cpu()
    done = subprocess.run(
        [*cmd, str(path)], capture_output=True, text=True, cwd=work, preexec_fn=preexec
    )
    cpu = _child_cpu() - cpu
    if done.returncode != 0 or "{" not in done.stdout:
        raise tmbench.SetupError(f"fio failed: {done.stderr[-400:]}")
    jobs = json.loads(done.stdout[done.stdout.index("{") :])["jobs"]
    per_job = {}
    for j in jobs:
        op = j["read"] if j["read"]["total_ios"] else j["write"]
        pct = (op.get("lat_ns") or {}).get("percentile") or {}
        per_job[j["jobname"]] = {
            "iops": j["read"]["iops"] + j["write"]["iops"],
            "p50_us": pct.get("50.000000", 0) / 1000,
            "p99_us": pct.get("99.000000", 0) / 1000,
        }
    return {"jobs": per_job, "cpu_s": cpu}


def run_tilemark(
    args: argparse.Namespace, path: Path, target: str, results: Path, extra: list[str] = ()
) -> dict:
    cmd = [args.tilemark, "run", str(path), "--results", str(results), *extra]
    if target.startswith("/dev/"):
        cmd += ["--destroy-data", target, "--force"]
    cpu = _child_cpu()
    done = subprocess.run(cmd, capture_output=True, text=True)
    cpu = _child_cpu() - cpu
    if done.returncode != 0:
        raise tmbench.SetupError(f"tilemark failed: {done.stderr[-400:]}")
    newest = max(glob.glob(f"{results}/*/run.json"), key=os.path.getmtime)
    per_job = {}
    for s in json.loads(Path(newest).read_text())["summary"]["streams"]:
        service = ((s["read"] or s["write"]) or {}).get("service") or {}
        per_job[s["name"]] = {
            "iops": s["total"]["iops"],
            "p50_us": (service.get("p50_ms") or 0) * 1000,
            "p99_us": (service.get("p99_ms") or 0) * 1000,
        }
    return {"jobs": per_job, "cpu_s": cpu}


# --- the block-layer trace (flowfio) ---


def _trace_write(name: str, value: str) -> None:
    (TRACE / name).write_text(value)


def trace_start(dev: str | None, sleeps: bool) -> None:
    """Block events of disk `dev` (major:minor) and, with `sleeps`, every clock_nanosleep."""
    TRACE.mkdir(exist_ok=True)
    _trace_write("tracing_on", "0")
    _trace_write("trace", "")
    _trace_write("buffer_size_kb", "32768")
    _trace_write("trace_clock", "mono")
    if dev is not None:
        major, minor = (int(x) for x in dev.split(":"))
        for ev in BLOCK_EVENTS:
            _trace_write(f"events/block/{ev}/filter", f"dev == {(major << 20) | minor}")
            _trace_write(f"events/block/{ev}/enable", "1")
    if sleeps:
        for ev in SLEEP_EVENTS:
            _trace_write(f"events/syscalls/{ev}/enable", "1")
    _trace_write("tracing_on", "1")


def trace_stop() -> str:
    _trace_write("tracing_on", "0")
    text = (TRACE / "trace").read_text()
    for ev in BLOCK_EVENTS:
        _trace_write(f"events/block/{ev}/enable", "0")
    for ev in SLEEP_EVENTS:
        _trace_write(f"events/syscalls/{ev}/enable", "0")
    _trace_write("trace", "")
    return text


SLEEP = re.compile(r"(?m)^\s*fio-(\d+)\s+\[\d+\]\s+\S+\s+(\d+\.\d+): sys_clock_nanosleep(.)")


def sleep_figures(text: str) -> dict[str, Any]:
    """How long fio's jobs slept per usleep (clock_nanosleep), its main thread's 10 ms polls
    (and anything else over 5 ms) left out."""
    started: dict[str, float] = {}
    slept = []
    for m in SLEEP.finditer(text):
        tid, t, kind = m.group(1), float(m.group(2)), m.group(3)
        if kind == "(":
            started[tid] = t
        elif tid in started:
            us = (t - started.pop(tid)) * 1e6
            if us < 5000:
                slept.append(us)
    slept.sort()
    if not slept:
        return {}
    return {
        "fio_sleeps": len(slept),
        "fio_sleep_p50_us": slept[len(slept) // 2],
        "fio_sleep_p90_us": slept[len(slept) * 9 // 10],
    }


def trace_remove() -> None:
    if TRACE.exists():
        TRACE.rmdir()


def extents(path: str) -> list[tuple[int, int]]:
    """The file's physical extents in 512-byte sectors of its disk (filefrag -v)."""
    out = subprocess.run(["filefrag", "-v", path], capture_output=True, text=True).stdout
    spans = []
    for line in out.splitlines():
        m = re.match(r"\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+)\.\.\s*(\d+):", line)
        if m:
            spans.append((int(m.group(1)) * 8, (int(m.group(2)) + 1) * 8))
    return spans


EVENT = re.compile(r"\s(\d+\.\d+): (block_rq_\w+): \d+,\d+ (\w+) .*?(\d+) \+ \d+")


def device_figures(text: str, spans: list[tuple[int, int]], ramp: float) -> dict[str, Any]:
    """What the device saw of the file's IO after the ramp: latency (issue to completion) of
    reads and writes, the share of writes that were at the device while reads were, and the
    time from the start of each read burst to the first write after it."""
    issued: dict[int, tuple[float, str]] = {}
    ios: list[tuple[float, float, str]] = []
    for m in EVENT.finditer(text):
        t, ev, rwbs, sector = float(m.group(1)), m.group(2), m.group(3), int(m.group(4))
        if not any(a <= sector < b for a, b in spans):
            continue
        if ev == "block_rq_issue":
            issued[sector] = (t, "W" if "W" in rwbs else "R")
        elif sector in issued:
            start, kind = issued.pop(sector)
            ios.append((start, t, kind))
    if not ios:
        return {}
    ios.sort()
    begin = ios[0][0] + ramp
    ios = [io for io in ios if io[0] >= begin]
    reads = [(a, b) for a, b, k in ios if k == "R"]
    writes = [(a, b) for a, b, k in ios if k == "W"]
    out: dict[str, Any] = {}
    for kind, span in (("read", reads), ("write", writes)):
        lat = sorted((b - a) * 1e6 for a, b in span)
        out[f"dev_{kind}_p50_us"] = lat[len(lat) // 2] if lat else None
    # A write was "with reads" when any read was at the device during any of its time.
    with_reads, alone = [], []
    starts = [a for a, _ in reads]
    import bisect

    for a, b in writes:
        i = bisect.bisect_left(starts, a - 0.1)
        overlap = any(ra < b and rb > a for ra, rb in reads[i : bisect.bisect_right(starts, b)])
        (with_reads if overlap else alone).append((b - a) * 1e6)
    out["writes_with_reads"] = len(with_reads) / len(writes) if writes else None
    out["dev_write_alone_p50_us"] = statistics.median(alone) if alone else None
    out["dev_write_with_reads_p50_us"] = statistics.median(with_reads) if with_reads else None
    # Read bursts, and the first write after each burst's start (before the next burst).
    bursts: list[float] = []
    last = None
    for a in starts:
        if last is None or a - last > BURST_GAP_S:
            bursts.append(a)
        last = a
    write_starts = [a for a, _ in writes]
    lags = []
    for i, b0 in enumerate(bursts):
        j = bisect.bisect_left(write_starts, b0)
        end = bursts[i + 1] if i + 1 < len(bursts) else float("inf")
        if j < len(write_starts) and write_starts[j] < end:
            lags.append((write_starts[j] - b0) * 1e6)
    out["read_bursts"] = len(bursts)
    out["reads_per_burst"] = len(reads) / len(bursts) if bursts else None
    out["write_within_50us_of_burst"] = sum(1 for x in lags if x < 50) / len(lags) if lags else None
    out["write_lag_p50_us"] = statistics.median(lags) if lags else None
    return out


def disk_of(path: str) -> str:
    st = os.stat(path)
    return f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}"


def _med(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r.get(key) is not None]
    return statistics.median(values) if values else None


def _range(runs: list[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in runs if r.get(key) is not None]
    if not values:
        return "-"
    fmt = "{:,.2f}" if max(values) < 10 else "{:,.0f}"
    mid, low, high = (fmt.format(v) for v in (statistics.median(values), min(values), max(values)))
    return f"{mid} ({low}-{high})"


def summarize(run: dict[str, Any], first: str) -> dict[str, Any]:
    jobs = run["jobs"]
    flat = {
        "iops": sum(j["iops"] for j in jobs.values()),
        "cpu_s": run["cpu_s"],
        "first_p50_us": jobs[first]["p50_us"],
        "first_p99_us": jobs[first]["p99_us"],
    }
    for name, j in jobs.items():
        flat[f"{name}_iops"] = j["iops"]
        flat[f"{name}_p50_us"] = j["p50_us"]
    return {**flat, **run.get("device", {}), "pressure": run["pressure"]}


def pressure() -> str:
    return "/".join(
        Path(f"/proc/pressure/{k}").read_text().split()[1].split("=")[1] for k in ("cpu", "io")
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=Path, required=True, help="fio's examples/ directory")
    p.add_argument("--case", choices=("sleep10", "flowfio"), required=True)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--runtime", type=float, default=2.0)
    p.add_argument("--ramp", type=float, default=1.0)
    p.add_argument("--size", type=tmbench.parse_size, default=tmbench.parse_size("512m"))
    p.add_argument("--file-dir", type=Path, default=Path("/var/tmp"))
    p.add_argument("--fio", default=tmbench.DEFAULT_FIO)
    p.add_argument("--tilemark", default=None)
    p.add_argument(
        "--build", action="append", default=[], help="NAME=PATH.so: an engine build to run"
    )
    p.add_argument("--fio-slack", type=int, default=None, help="also run fio with this slack")
    p.add_argument(
        "--tilemark-variant",
        action="append",
        default=[],
        help="NAME=ARGS: also run tilemark with these command-line arguments (tilemark-NAME)",
    )
    p.add_argument(
        "--trace-sleeps",
        action="store_true",
        help="trace fio's clock_nanosleep calls: how long its usleep(flow_sleep) slept",
    )
    p.add_argument(
        "--unpaced",
        action="store_true",
        help="also run every tool on the example without its flow lines (TOOL-unpaced)",
    )
    p.add_argument(
        "--fio-variant",
        action="append",
        default=[],
        help="NAME=OPT=VALUE[,OPT=VALUE]: also run fio with these options added (fio-NAME)",
    )
    args = p.parse_args(argv)
    args.tilemark = tmbench.find_tilemark(args.tilemark)
    tmbench.check_fio(args.fio)
    builds = dict(b.split("=", 1) for b in args.build)
    installed = ENGINE.read_bytes() if builds else None
    tools = ["fio"]
    if args.fio_slack is not None:
        tools.append(f"fio-slack{args.fio_slack}")
    variants = {}
    for v in args.fio_variant:
        vname, options = v.split("=", 1)
        variants[f"fio-{vname}"] = options.split(",")
    tools += list(variants)
    tools += [f"tilemark-{b}" for b in builds] or ["tilemark"]
    tm_variants = {}
    for v in args.tilemark_variant:
        vname, cli = v.split("=", 1)
        tm_variants[f"tilemark-{vname}"] = shlex.split(cli)
    tools += list(tm_variants)
    if args.unpaced:
        tools += [f"{t}-unpaced" for t in tools]
    if args.case == "sleep10":
        name, extra, first = "butterfly.fio", ["flow_sleep=10"], "forward"
    else:
        name, extra, first = "flow.fio", [], "job2"
    runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
    before = tmbench.load_now()
    folder: Path | None = None
    try:
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            results = work / "results"
            if args.case == "sleep10":
                ram_cm = tmbench.ramdisk(tmbench.parse_size("1g"), RAM_IMAGE)
                ram = ram_cm.__enter__()
                targets = {t: ram["device"] for t in tools}
                where = f"loop device {ram['device']} over 1 GiB in tmpfs"
            else:
                ram_cm = None
                folder = Path(tempfile.mkdtemp(prefix="tilemark-flow-pace-", dir=args.file_dir))
                fio_file, tm_file = folder / "fio.dat", folder / "tilemark.dat"
                fio_jobs.write_full(fio_file, args.size)
                targets = {t: str(tm_file if t.startswith("tilemark") else fio_file) for t in tools}
                mount = tmbench.run_text(
                    ["findmnt", "-n", "-o", "TARGET,SOURCE,FSTYPE", "-T", str(folder)]
                )
                where = f"files in {folder} ({mount}), fio's written in full beforehand"
            try:
                paths = {}
                for tool in tools:
                    paths[tool] = work / f"{tool}-{name}"
                    base = tool.removesuffix("-unpaced")
                    if base != tool:
                        text = job_text(args, name, targets[tool], variants.get(base, []))
                        text = re.sub(r"(?m)^\s*flow(_id|_sleep)?\s*=.*\n", "", text)
                    else:
                        text = job_text(args, name, targets[tool], extra + variants.get(tool, []))
                    paths[tool].write_text(text)
                if args.case == "flowfio":
                    # tilemark lays out (creates and fills) its file at its first run: once
                    # here, untraced and not counted.
                    tool = tools[-1]
                    run_tilemark(args, paths[tool], targets[tool], results)
                for rep in range(args.reps):
                    order = tools if rep % 2 == 0 else list(reversed(tools))
                    for tool in order:
                        base = tool.removesuffix("-unpaced")
                        sleeps = args.trace_sleeps and base.startswith("fio")
                        traced = args.case == "flowfio" or sleeps
                        if traced:
                            disk = disk_of(targets[tool]) if args.case == "flowfio" else None
                            trace_start(disk, sleeps)
                        if base.startswith("fio"):
                            slack = args.fio_slack if base.startswith("fio-slack") else None
                            run = run_fio(args, paths[tool], work, slack)
                        else:
                            build = builds.get(base.removeprefix("tilemark-"))
                            if build:
                                shutil.copyfile(build, str(ENGINE) + ".tmp")
                                os.replace(str(ENGINE) + ".tmp", ENGINE)
                            cli = tm_variants.get(base, [])
                            run = run_tilemark(args, paths[tool], targets[tool], results, cli)
                        if traced:
                            text = trace_stop()
                            run["device"] = sleep_figures(text) if sleeps else {}
                            if args.case == "flowfio":
                                spans = extents(targets[tool])
                                run["device"] |= device_figures(text, spans, args.ramp)
                        run["pressure"] = pressure()
                        runs[tool].append(summarize(run, first))
                        print(
                            f"rep {rep} {tool}: {json.dumps(runs[tool][-1], default=str)}",
                            flush=True,
                        )
            finally:
                if ram_cm is not None:
                    ram_cm.__exit__(None, None, None)
    finally:
        if installed is not None:
            ENGINE.with_suffix(".tmp").write_bytes(installed)
            os.replace(ENGINE.with_suffix(".tmp"), ENGINE)
        trace_remove()
        if folder is not None:
            for f in folder.glob("*"):
                f.unlink()
            folder.rmdir()
    keys = sorted({k for rs in runs.values() for r in rs for k in r if k != "pressure"})
    doc = {
        "command": shlex.join([sys.executable, *sys.argv]),
        "case": args.case,
        "job": name,
        "extra": extra,
        "fio_variants": variants,
        "tilemark_variants": tm_variants,
        "where": where,
        "reps": args.reps,
        "runtime": args.runtime,
        "ramp": args.ramp,
        "builds": builds,
        "runs": runs,
        "medians": {t: {k: _med(rs, k) for k in keys} for t, rs in runs.items()},
        "load_before": before,
        "load_after": tmbench.load_now(),
        "machine": tmbench.machine_notes(
            tmbench.Settings(tilemark=args.tilemark, fio=args.fio, target=str(args.file_dir))
        ),
    }
    lines = [
        f"# fio's flow control side by side: {args.case} ({name}"
        + (f" with {', '.join(extra)}" if extra else "")
        + ")",
        "",
        f"`{doc['command']}`; {where}; {args.reps} alternating repetitions of {args.runtime:g} s"
        f" after a {args.ramp:g} s ramp. Cells: median (min-max) over the repetitions. Latency"
        " is fio's lat (submission to completion) and tilemark's service time, in us; cpu_s"
        " the tool process's CPU seconds (tilemark's includes Python's start). Pressure:"
        " /proc/pressure cpu/io `some avg10` after each run.",
        "",
        "| figure | " + " | ".join(tools) + " |",
        "|---|" + "---|" * len(tools),
    ]
    for k in keys:
        lines.append(f"| {k} | " + " | ".join(_range(runs[t], k) for t in tools) + " |")
    lines.append(
        "| pressure | "
        + " | ".join(", ".join(r["pressure"] for r in runs[t]) for t in tools)
        + " |"
    )
    lines += ["", f"Load before: {before}", f"Load after: {doc['load_after']}", ""]
    md = "\n".join(lines)
    paths_written = tmbench.write_results(tmbench.RESULTS_DIR, f"flow-{args.case}", doc, md)
    print(md)
    print("wrote", *paths_written)
    return 0


if __name__ == "__main__":
    sys.exit(main())
