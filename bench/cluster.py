"""The same total load from one process and from `--cluster local:2`: what the cluster costs.

`--cluster local:2` runs the plan on two Dask worker processes of this machine, each with its own
engine; the client merges their snapshots. This benchmark runs one workload of two identical
streams (4 KiB random reads, O_DIRECT, QD 16 each, io_uring) both ways:

- one process: `tilemark run two.toml --threads 2` (two engine threads, one stream each);
- cluster: `tilemark run two.toml --cluster local:2 --threads 1`, the file pinning one stream to
  each worker (`host = "0"` / `host = "1"`): again two engine threads, one stream each.

The target is a RAM disk, so the storage is not the bottleneck and the harness's cost shows:
SIZE of random data in tmpfs attached twice with `losetup --direct-io=on` (two loop devices
over the same bytes; the one-process run reads the first, the cluster's workers one each
through `--target .../dev-{worker}`). A `null` backend case repeats the comparison without any
IO. Runs alternate between the two modes (the first mode flips every repetition), after a
sync() and a 1 s pause each, and every run records the load average and pressure stall
information before it starts, because the machine is shared.

CPU per IO is vs_fio's "window" figure: CPU time of the whole process tree (the client and, for
the cluster, its worker processes) between samples 0.5 s inside the measurement window, over
the IOs of that window. "whole" is the same over the whole process lifetime (Python and Dask
start-up included) per IO measured.

    sudo .venv/bin/python bench/cluster.py --ramdisk 512m --reps 3 --duration 5 --warmup 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import tmbench as tb
from tmbench import spread

WORK = tb.WORK / "cluster"
IMAGE = Path("/dev/shm/tilemark-bench-cluster.img")
SCHEMA = "tilemark-bench-cluster/1"
QD = 16
CASES = {"uring": "4 KiB random read, O_DIRECT, io_uring", "null": "null backend (no IO)"}


def workload(pinned: bool) -> Path:
    """Two identical 4 KiB random-read streams; pinned: one on each local worker."""
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / ("two-pinned.toml" if pinned else "two.toml")
    lines = []
    for name, host in (("a", "0"), ("b", "1")):
        lines += [
            "[[stream]]",
            f'name = "{name}"',
            'rw = "randread"',
            'bs = "4k"',
            f"qd = {QD}",
            *([f'host = "{host}"'] if pinned else []),
            "",
        ]
    path.write_text("\n".join(lines))
    return path


@contextmanager
def ramdisk(size: int) -> Any:
    """SIZE random bytes in tmpfs attached as two loop devices; dev-0 and dev-1 link to them."""
    if os.geteuid() != 0:
        raise SystemExit("bench/cluster.py needs root (it attaches loop devices)")
    losetup = shutil.which("losetup") or "losetup"
    devices: list[str] = []
    WORK.mkdir(parents=True, exist_ok=True)
    try:
        tb.fill_random(IMAGE, size)
        for i in range(2):
            cmd = [losetup, "--find", "--show", "--direct-io=on", str(IMAGE)]
            dev = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.strip()
            devices.append(dev)
            link = WORK / f"dev-{i}"
            link.unlink(missing_ok=True)
            link.symlink_to(dev)
        yield devices
    finally:
        for dev in devices:
            subprocess.run([losetup, "--detach", dev], capture_output=True)
        for i in range(2):
            (WORK / f"dev-{i}").unlink(missing_ok=True)
        IMAGE.unlink(missing_ok=True)


def run_once(mode: str, case: str, args: argparse.Namespace, rep: int) -> dict[str, Any]:
    target = str(WORK / ("dev-{worker}" if mode == "cluster" else "dev-0"))
    cmd = [
        args.tilemark, "run", str(workload(mode == "cluster")), "--target", target,
        "--size", args.size, "--backend", case, "--duration", str(args.duration),
        "--warmup", str(args.warmup), "--interval", "1s", "--seed", str(1000 + rep),
        "--results", str(WORK / "results"), "--json",
        "--threads", "1" if mode == "cluster" else "2",
    ]  # fmt: skip
    if mode == "cluster":
        cmd += ["--cluster", "local:2"]
    tb.settle()
    load = tb.load_now()  # the machine is shared
    child = tb.run_child(cmd, f"cluster-{case}-{mode}-{rep}")
    if child.exit_code != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({child.exit_code}):\n{child.stderr[-2000:]}")
    doc = json.loads(child.stdout)
    run = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    result = run["result"]
    t0 = int(result["started_at_ns"]) / 1e9
    start, end = (
        t0 + int(result["measure_start_ns"]) / 1e9,
        t0 + int(result["measure_end_ns"]) / 1e9,
    )
    iops = float(doc["summary"]["total"]["iops"])
    ios = iops * float(doc["summary"]["duration_s"])
    window_us = tb.cpu_us_per_io(tb.window_cpu(child.samples, start, end), iops)
    hosts = doc["summary"].get("hosts") or []
    return {
        "mode": mode,
        "case": case,
        "rep": rep,
        "load_before": load,
        "iops": iops,
        "cpu_window_us_per_io": window_us,
        "cpu_whole_us_per_io": child.rusage_cpu_s / ios * 1e6 if ios else None,
        "wall_s": child.wall_s,
        "hosts": [{k: h.get(k) for k in ("name", "iops", "start_late_ms")} for h in hosts],
        "start_spread_ms": (doc["summary"].get("cluster") or {}).get("start_spread_ms"),
        "cmd": cmd,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in CASES:
        by = {
            m: [r for r in runs if r["case"] == case and r["mode"] == m] for m in ("one", "cluster")
        }
        if not by["one"]:
            continue
        pairs = list(zip(by["one"], by["cluster"], strict=True))
        row: dict[str, Any] = {}
        for key in ("iops", "cpu_window_us_per_io", "cpu_whole_us_per_io"):
            row[key] = {m: spread([r[key] for r in by[m] if r[key] is not None]) for m in by}
            row[f"{key}_ratio"] = spread(
                [c[key] / o[key] for o, c in pairs if o[key] and c[key] is not None]
            )
        row["overhead_us_per_io"] = spread(
            [
                c["cpu_window_us_per_io"] - o["cpu_window_us_per_io"]
                for o, c in pairs
                if o["cpu_window_us_per_io"] is not None and c["cpu_window_us_per_io"] is not None
            ]
        )
        out[case] = row
    return out


def fmt(s: dict[str, float] | None, digits: int = 2) -> str:
    if not s:
        return "-"
    return f"{s['median']:,.{digits}f} ({s['min']:,.{digits}f} .. {s['max']:,.{digits}f})"


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# One process vs `--cluster local:2`, {doc['date']}",
        "",
        f"Command: `{doc['command']}`. Method: bench/cluster.py (docstring). Figures: median "
        "(min .. max) over the repetitions; ratios are formed per repetition (cluster / one "
        "process).",
        "",
        "| case | mode | IOPS | CPU/IO window (us) | CPU/IO whole (us) |",
        "|---|---|---|---|---|",
    ]
    for case, row in doc["summary"].items():
        for mode in ("one", "cluster"):
            lines.append(
                f"| {CASES[case]} | {'1 process' if mode == 'one' else 'local:2'} | "
                f"{fmt(row['iops'][mode], 0)} | {fmt(row['cpu_window_us_per_io'][mode], 3)} | "
                f"{fmt(row['cpu_whole_us_per_io'][mode], 3)} |"
            )
        lines.append(
            f"| {CASES[case]} | ratio | {fmt(row['iops_ratio'], 3)} | "
            f"{fmt(row['cpu_window_us_per_io_ratio'], 3)} | "
            f"{fmt(row['cpu_whole_us_per_io_ratio'], 3)} |"
        )
    lines += ["", "Cluster overhead per IO (window CPU, cluster minus one process):", ""]
    for case, row in doc["summary"].items():
        lines.append(f"- {CASES[case]}: {fmt(row['overhead_us_per_io'], 3)} us")
    lines += ["", "Runs in order (load average and PSI avg10 just before each run):", ""]
    lines += [
        "| # | case | mode | IOPS | CPU/IO window | loadavg | cpu some | io some | start ms |"
    ]
    lines += ["|---|---|---|---|---|---|---|---|---|"]
    for i, r in enumerate(doc["runs"], 1):
        load = r["load_before"]
        lines.append(
            f"| {i} | {r['case']} | {r['mode']} | {r['iops']:,.0f} | "
            f"{r['cpu_window_us_per_io'] or 0:.3f} | {' '.join(load['loadavg'])} | "
            f"{load['cpu_some_avg10']} | {load['io_some_avg10']} | "
            f"{'-' if r['start_spread_ms'] is None else round(r['start_spread_ms'], 3)} |"
        )
    m = doc["machine"]
    lines += [
        "",
        f"Machine: {m['cpu_model']}, {m['cpus']} CPUs, {m['memory_gib']} GiB, kernel "
        f"{m['kernel']}, {m['os']}; virtualized: {m['virtualized']}; shared with other "
        "builds and tests while this ran (see the load columns).",
        f"Target: {doc['ramdisk']}.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ramdisk", default="512m", help="RAM disk size (default 512m)")
    parser.add_argument("--size", default="256m", help="data area the runs use (default 256m)")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--warmup", type=float, default=1.0)
    parser.add_argument("--cases", default="uring,null")
    parser.add_argument("--tilemark", default=str(tb.REPO / ".venv" / "bin" / "tilemark"))
    parser.add_argument("--out", default=str(tb.RESULTS_DIR))
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c in CASES]
    size = tb.parse_size(args.ramdisk)
    runs: list[dict[str, Any]] = []
    with ramdisk(size) as devices:
        for rep in range(args.reps):
            for case in cases:
                order = ("one", "cluster") if rep % 2 == 0 else ("cluster", "one")
                for mode in order:
                    r = run_once(mode, case, args, rep)
                    runs.append(r)
                    print(
                        f"{case:5} {mode:7} rep {rep}: {r['iops']:,.0f} IOPS, "
                        f"{r['cpu_window_us_per_io'] or 0:.3f} us CPU/IO (window), "
                        f"load {' '.join(r['load_before']['loadavg'])}",
                        flush=True,
                    )
        settings = tb.Settings(
            args.tilemark, "fio", size, args.duration, args.warmup, args.reps,
            target=devices[0], device=True,
        )  # fmt: skip
        machine = tb.machine_notes(settings)
    now = datetime.now()
    doc = {
        "schema": SCHEMA,
        "date": datetime.now().astimezone().isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "machine": machine,
        "ramdisk": f"{args.ramdisk} of random data in /dev/shm, two loop devices over it "
        f"(--direct-io=on), runs use {args.size}",
        "summary": summarize(runs),
        "runs": runs,
    }
    tb.write_results(
        Path(args.out), "cluster-local2-ramdisk", doc, markdown(doc), when=now, indent=2
    )
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
