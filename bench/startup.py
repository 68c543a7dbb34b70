"""How long tilemark takes to start: whole commands, timed as processes (design.md budget:
`--help` <= 0.3 s; a short command, `runs` or `import-fio`, <= 0.5 s).

Each command runs --reps times after one untimed run (the page cache holds the code then, as
it does for a user who runs tilemark twice); the figures are wall time and peak RSS per
process, min/median/max, with the load the machine was under. fio's `--help` runs beside them
as the yardstick the issue quotes.

    .venv/bin/python bench/startup.py              # 10 reps, results in bench/results/
    .venv/bin/python bench/startup.py --reps 20 --out /tmp

Exit status: 0 every budget met (by the median), 1 one missed, 2 tilemark is not installed.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import tmbench as tb

TILEMARK = tb.REPO / ".venv" / "bin" / "tilemark"
SCHEMA = "tilemark-bench-startup/1"
JOB = "[a]\nrw=randread\nbs=4k\nsize=1m\nruntime=10\n"
# (name, arguments, budget in seconds or None)
CASES = [
    ("--help", ["--help"], 0.3),
    ("--version", ["--version"], 0.3),
    ("runs", ["runs", "--results", "{results}"], 0.5),
    ("import-fio", ["import-fio", "{job}"], 0.5),
    ("profiles", ["profiles"], None),
]


def _timed(argv: list[str]) -> tuple[float, int]:
    """(wall seconds, peak RSS in KiB) of one process run to its end."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return elapsed, usage.ru_maxrss


def _pressure() -> dict[str, str]:
    """The "some" line of CPU and IO pressure, as text."""
    return {
        kind: ((tb.read_text(f"/proc/pressure/{kind}") or "").splitlines() or ["unavailable"])[0]
        for kind in ("cpu", "io")
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--tilemark", default=str(TILEMARK))
    ap.add_argument("--out", default=str(tb.RESULTS_DIR))
    args = ap.parse_args()
    if not Path(args.tilemark).exists():
        print(f"startup: {args.tilemark} is missing; run `make build` first", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="tilemark-startup-"))
    job = work / "job.fio"
    job.write_text(JOB)
    cases = [(n, [a.format(results=work / "results", job=job) for a in argv], b)
             for n, argv, b in CASES]  # fmt: skip
    if shutil.which("fio"):
        cases.append(("fio --help (yardstick)", None, None))
    rows = []
    load_before = os.getloadavg()
    for name, argv, budget in cases:
        full = [shutil.which("fio"), "--help"] if argv is None else [args.tilemark, *argv]
        _timed(full)  # untimed: code into the page cache
        samples = [_timed(full) for _ in range(args.reps)]
        walls = [s[0] for s in samples]
        rss = [s[1] for s in samples]
        median = statistics.median(walls)
        rows.append(
            {
                "case": name,
                "argv": full[1:],
                "wall_s": {"min": min(walls), "median": median, "max": max(walls)},
                "peak_rss_mib": statistics.median(rss) / 1024,
                "budget_s": budget,
                "pass": None if budget is None else median <= budget,
            }
        )
    shutil.rmtree(work, ignore_errors=True)
    now = dt.datetime.now()
    stamp = now.strftime("%Y-%m-%d-%H%M%S")
    notes = tb.machine_notes(tb.Settings(args.tilemark, shutil.which("fio") or tb.DEFAULT_FIO))
    doc = {
        "schema": SCHEMA,
        "date": stamp,
        "machine": notes
        | {
            "host": platform.node(),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_before": load_before,
            "pressure_after": _pressure(),
        },
        "reps": args.reps,
        "cases": rows,
    }
    lines = [
        f"# CLI start-up, {stamp}",
        "",
        f"{args.reps} runs each after one untimed run; host {platform.node()}, "
        f"{os.cpu_count()} CPUs, load before {load_before[0]:.2f}, pressure after: "
        f"cpu `{doc['machine']['pressure_after']['cpu']}`.",
        "",
        "| command | min s | median s | max s | peak RSS MiB | budget s | verdict |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        w = r["wall_s"]
        verdict = "-" if r["pass"] is None else ("pass" if r["pass"] else "FAIL")
        budget = "-" if r["budget_s"] is None else f"{r['budget_s']:g}"
        lines.append(
            f"| `{r['case']}` | {w['min']:.3f} | {w['median']:.3f} | {w['max']:.3f} | "
            f"{r['peak_rss_mib']:.0f} | {budget} | {verdict} |"
        )
    tb.write_results(Path(args.out), "startup", doc, "\n".join(lines) + "\n", when=now, indent=2)
    print("\n".join(lines))
    return 0 if all(r["pass"] is not False for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
