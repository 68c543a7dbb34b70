"""The engine's CPU per IO on the null backend, two builds alternated (A/B of an engine change).

    .venv/bin/python bench/engine_cpu_ab.py --base /tmp/base.so --new /tmp/new.so --pairs 8 \\
        --rw randread,read,randrw

Each build is an `_engine.abi3.so` (`cargo build --release -p tilemark-py` of a checkout, file
`target/release/lib_engine.so`, or the one `make build` installs). Before each run the script
puts one in place of python/tilemark/_engine.abi3.so (and the --new one back at the end), runs
`tilemark run --backend null` on a 64 MiB file in /dev/shm for a fixed count of 4k IOs at depth
1 and takes the child's CPU (user + system, rusage): the engine's own path, which contention on
a shared machine stretches far less than a rate. Builds alternate, base first in even pairs.
Printed: per rw the medians in ns per IO (Python's start, ~0.4 s, is in both), the median and
range of new/base per pair, the raw figures, and CPU/IO pressure (avg10) at each run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
from pathlib import Path

from tmbench import REPO

ENGINE = REPO / "python/tilemark/_engine.abi3.so"


def _use(build: Path) -> None:
    shutil.copyfile(build, str(ENGINE) + ".tmp")
    os.replace(str(ENGINE) + ".tmp", ENGINE)


def _pressure() -> str:
    return "/".join(
        Path(f"/proc/pressure/{k}").read_text().split()[1].split("=")[1] for k in ("cpu", "io")
    )


def _run(rw: str, ios: int, results: str) -> float:
    cmd = [str(REPO / ".venv/bin/tilemark"), "run", "--backend", "null", "--target",
           "/dev/shm/tilemark-engine-cpu-ab.dat", "--size", "64m", "--rw", rw, "--bs", "4k",
           "--qd", "1", "--io-size", str(ios * 4096), "--results", results, "--json"]  # fmt: skip
    before = os.times()
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    after = os.times()
    cpu = after.children_user - before.children_user
    cpu += after.children_system - before.children_system
    return cpu / ios * 1e9


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--new", type=Path, required=True)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--rw", default="randread,read")
    p.add_argument("--ios", type=int, default=12_000_000)
    p.add_argument("--results", default="/tmp/tilemark-engine-cpu-ab")
    args = p.parse_args()
    builds = {"base": args.base, "new": args.new}
    rws = args.rw.split(",")
    ns: dict[tuple[str, str], list[float]] = {(rw, b): [] for rw in rws for b in builds}
    pressures = []
    try:
        for i in range(args.pairs):
            for rw in rws:
                for b in ("base", "new") if i % 2 == 0 else ("new", "base"):
                    _use(builds[b])
                    ns[(rw, b)].append(_run(rw, args.ios, args.results))
                    pressures.append(_pressure())
    finally:
        _use(args.new)
    for rw in rws:
        base, new = ns[(rw, "base")], ns[(rw, "new")]
        ratios = sorted(n / b for b, n in zip(base, new, strict=True))
        print(
            f"{rw}: {args.pairs} pairs, base {statistics.median(base):.1f} new "
            f"{statistics.median(new):.1f} ns/IO; new/base {statistics.median(ratios):.3f} "
            f"({ratios[0]:.3f}-{ratios[-1]:.3f}), new higher in "
            f"{sum(n > b for b, n in zip(base, new, strict=True))} of {args.pairs}"
        )
        print("  base", " ".join(f"{x:.1f}" for x in base))
        print("  new ", " ".join(f"{x:.1f}" for x in new))
    print("pressure cpu/io avg10 per run:", " ".join(pressures))


if __name__ == "__main__":
    main()
