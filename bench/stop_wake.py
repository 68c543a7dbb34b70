"""How soon another engine thread sees a stream stop: a stream `a` on one thread ends at
1.3 s and stops (`on_end_stop`) stream `b`, a 0.2 IOPS stream on the other thread, whose
thread is asleep waiting for its next issue time. Prints, per run, how long after `a`'s end
`b` ended (the engine's spans), then the median; writes nothing.

    .venv/bin/python bench/stop_wake.py --reps 6 [--tilemark WRAPPER]

Without the engine threads' doorbells (stop.rs) `b`'s thread saw the stop only when its own
wait ended; with them the stop wakes it (docs/engine-boundary.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

import fidelity as fid
from tilemark.store.results import read_run

WORKLOAD = """\
threads = 2
duration = "3s"

[[stream]]
name = "a"
rw = "randread"
bs = "4k"
rate = 200
stop = "1.3s"
on_end_stop = "b"

[[stream]]
name = "b"
rw = "randread"
bs = "4k"
rate = 0.2
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=6)
    ap.add_argument("--tilemark", default=fid.tilemark())
    args = ap.parse_args()
    gaps_ms = []
    with tempfile.TemporaryDirectory(prefix="tm-stopwake-") as tmp:
        work = Path(tmp)
        (work / "w.toml").write_text(WORKLOAD)
        for rep in range(args.reps):
            target = work / f"t{rep}.dat"
            out = subprocess.run(
                [args.tilemark, "run", str(work / "w.toml"), "--target", str(target),
                 "--size", "64m", "--results", str(work / "results"), "--json"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            run_dir = Path(json.loads(out.stdout)["run_dir"])
            doc = read_run((run_dir / "run.json").read_bytes())
            a, b = doc.result.spans
            gap = (b.ended_ns - a.ended_ns) / 1e6
            gaps_ms.append(gap)
            print(f"run {rep + 1}: b ended {gap:.3f} ms after a", flush=True)
            target.unlink()
    print(f"median {statistics.median(gaps_ms):.3f} ms, range {min(gaps_ms):.3f}-"
          f"{max(gaps_ms):.3f} ms over {len(gaps_ms)} runs")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
