"""Quick A/B of tilemark variants and fio on one block device (bench/results/LOG.md, "Deep queues").

    sudo .venv/bin/python bench/spin_ab.py --device /dev/loop0 --qd 32 --reps 3 \\
        tm fio 'p100:--poll-us 100' 'tmpin::taskset -c 1'

A variant is NAME[:TILEMARK FLAGS[:WRAPPER]]; a NAME starting with "fio" runs fio (flags
ignored), any other tilemark. Variants alternate, repetition after repetition. Each run is
1 s of warm-up and 4 s measured, random reads (or --rw) of --bs at --qd over the first GiB.
The figures are each tool's own IOPS and the CPU time of its whole process tree, start-up
included: good for comparing variants of one tool, while budgets are vs_fio.py's to judge.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

from tmbench import REPO as ROOT


def _timed(cmd: list[str]) -> tuple[str, float]:
    before = os.times()
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    return out, cpu


def tilemark(args: argparse.Namespace, flags: list[str], wrap: list[str]) -> tuple[float, float]:
    cmd = [*wrap, args.tilemark, "run", *flags, "--target", args.device, "--rw", args.rw]
    cmd += ["--bs", args.bs, "--qd", str(args.qd), "--align", args.bs, "--size", "1g"]
    cmd += ["--duration", "4", "--warmup", "1", "--results", args.results, "--json"]
    out, cpu = _timed(cmd)
    return json.loads(out)["summary"]["total"]["iops"], cpu


def fio(args: argparse.Namespace, wrap: list[str]) -> tuple[float, float]:
    cmd = [*wrap, "fio", "--name=x", "--ioengine=io_uring", "--direct=1", f"--rw={args.rw}"]
    cmd += [f"--bs={args.bs}", f"--iodepth={args.qd}", "--time_based", "--runtime=4"]
    cmd += ["--ramp_time=1", f"--filename={args.device}", "--size=1g", "--norandommap"]
    cmd += ["--randrepeat=0", "--output-format=json"]
    out, cpu = _timed(cmd)
    job = json.loads(out)["jobs"][0]
    return job["read"]["iops"] + job["write"]["iops"], cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", required=True, help="block device to read (e.g. a loop device)")
    p.add_argument("--qd", type=int, default=32)
    p.add_argument("--bs", default="4k")
    p.add_argument("--rw", default="randread", help="randread or read (reads only)")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--tilemark", default=str(ROOT / ".venv/bin/tilemark"))
    p.add_argument("--results", default="/tmp/tilemark-spin-ab")
    p.add_argument("variants", nargs="+")
    args = p.parse_args()
    if args.rw not in ("randread", "read"):
        p.error("--rw must be randread or read: this script only reads the device")
    results: dict[str, list[tuple[float, float]]] = {}
    for rep in range(args.reps):
        for variant in args.variants:
            name, flags, wrap = ([*variant.split(":", 2), "", ""])[:3]
            if name.startswith("fio"):
                iops, cpu = fio(args, wrap.split())
            else:
                iops, cpu = tilemark(args, flags.split(), wrap.split())
            results.setdefault(name, []).append((iops, cpu))
            print(f"{rep} {name:12s} {iops:10.0f} IOPS  cpu {cpu:.2f} s", flush=True)
    for name, runs in results.items():
        iops = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        print(f"{name:12s} median {iops:10.0f} IOPS, cpu {cpu:.2f} s")


if __name__ == "__main__":
    main()
