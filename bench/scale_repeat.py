"""Does a scaling study give the same answer twice? The same study, repeated, on one disk.

A storage benchmark whose answer flips between identical runs cannot be used to buy or tune
storage. This script runs the same light-tile scaling study (bench/light-tile.toml) several
times on one target and records each answer, in two modes, alternating:

- `classic`: every step measured exactly --duration and believed at once (--confirm-runs 0,
  --max-duration = --duration, --no-settle): how tilemark decided before it knew the
  uncertainty of its criteria.
- `default`: tilemark's defaults (confidence intervals, steps measured until decided up to
  4x --duration, failures confirmed by the majority of runs, non-monotonic steps re-checked).

It writes bench/results/<date>-<time>-<host>-scale-repeat.{json,md}: every study's answer, runs
used, wall time, deciding criterion, and the host's IO and CPU pressure (PSI) over each study, so
a surprising answer carries its evidence. It measures the storage and tilemark's rules together;
on a noisy shared disk the point is how often the answers agree, not the answer itself.

    .venv/bin/python bench/scale_repeat.py --rounds 3
    .venv/bin/python bench/scale_repeat.py --rounds 3 --modes default --duration 20
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import tmbench as tb

ROOT = tb.REPO
WORK = tb.WORK
SCHEMA = "tilemark-bench-scale-repeat/1"
MODES = {
    "classic": ["--confirm-runs", "0", "--no-settle"],  # plus --max-duration = --duration
    "default": [],
}


def run_study(args: argparse.Namespace, mode: str, target: Path, results: Path) -> dict:
    cmd = [
        str(ROOT / ".venv" / "bin" / "tilemark"), "scale", str(ROOT / "bench" / "light-tile.toml"),
        "--target", str(target), "--capacity", args.capacity, "--tiles", args.tiles,
        "--duration", str(args.duration), "--warmup", str(args.warmup),
        "--results", str(results), "--json", "--no-report", *MODES[mode],
    ]  # fmt: skip
    if mode == "classic":
        cmd += ["--max-duration", str(args.duration)]
    before = {k: tb.psi_some(k) for k in ("io", "cpu")}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.monotonic() - t0
    after = {k: tb.psi_some(k) for k in ("io", "cpu")}
    # Mean pressure over the study: growth of the stall total over the wall time.
    pressure = {
        k: round((after[k].get("total", 0) - before[k].get("total", 0)) / 1e6 / wall * 100, 1)
        for k in ("io", "cpu")
        if after[k]
    }
    if proc.returncode not in (0, 3):
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"tilemark scale failed with exit status {proc.returncode}")
    doc = json.loads(proc.stdout)
    first = doc.get("first_failure") or {}
    deciding = first.get("deciding")
    return {
        "mode": mode,
        "study_id": doc["study_id"],
        "max_passing_tiles": doc["max_passing_tiles"],
        "runs_used": doc["runs_used"],
        "steps": [
            {
                "tiles": s["tiles"],
                "verdict": s["verdict"],
                "votes": s["votes"],
                "measured_s": [r.get("measured_s") for r in s["runs"]],
            }
            for s in doc["steps"]
        ],  # fmt: skip
        "first_failure_tiles": first.get("tiles"),
        "within_noise": first.get("within_noise"),
        "deciding": None
        if not deciding
        else {
            k: deciding.get(k)
            for k in (
                "app",
                "tile",
                "criterion",
                "value",
                "limit",
                "margin_pct",
                "ci_low",
                "ci_high",
                "decision",
            )
        },  # fmt: skip
        "non_monotonic": doc.get("non_monotonic"),
        "settle_s": (doc.get("settle") or {}).get("seconds"),
        "wall_s": round(wall, 1),
        "pressure_pct": pressure,
        "command": cmd,
    }


def markdown(report: dict) -> str:
    lines = [
        f"# Scaling-study repeatability, {report['date']} on {report['machine']['host']}",
        "",
        f"Command: `{' '.join(report['argv'])}`",
        "",
        f"Machine: {report['machine']['kernel']}, {report['machine']['cpus']} CPUs; target "
        f"{report['target']} ({report['capacity']}); light tile (bench/light-tile.toml), "
        f"tiles {report['tiles']}, {report['duration']} s + {report['warmup']} s warm-up per step.",
        "",
        "| # | mode | max passing tiles | runs | wall s | first failure | deciding criterion "
        "| IO / CPU pressure % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, s in enumerate(report["studies"], 1):
        d = s["deciding"]
        deciding = "-"
        if d:
            ci = ""
            if d.get("ci_low") is not None:
                ci = f", CI {d['ci_low']:.3g}-{d['ci_high']:.3g}"
            margin = f"{d['margin_pct']:+.0f}%" if d.get("margin_pct") is not None else ""
            value = f"{d['value']:.3g}" if d.get("value") is not None else "-"
            deciding = f"{d['app']} {d['criterion']} {value} vs {d['limit']:g} ({margin}{ci})"
            if s.get("within_noise"):
                deciding += ", within noise"
        p = s["pressure_pct"]
        psi_text = f"{p.get('io', '-')} / {p.get('cpu', '-')}"
        lines.append(
            f"| {i} | {s['mode']} | {s['max_passing_tiles']} | {s['runs_used']} | {s['wall_s']} "
            f"| {s['first_failure_tiles']} | {deciding} | {psi_text} |"
        )
    lines.append("")
    for mode in report["modes"]:
        answers = [s["max_passing_tiles"] for s in report["studies"] if s["mode"] == mode]
        lines.append(f"- {mode}: answers {answers}, all equal: {len(set(answers)) == 1}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="studies per mode (default 3)")
    ap.add_argument("--modes", default="classic,default", help="classic,default")
    ap.add_argument("--tiles", default="1..8")
    ap.add_argument("--duration", type=float, default=10)
    ap.add_argument("--warmup", type=float, default=2)
    ap.add_argument("--capacity", default="4g")
    ap.add_argument("--target", default=str(WORK / "scale.dat"))
    ap.add_argument("--out", default=str(tb.RESULTS_DIR))
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r} (classic, default)")
    WORK.mkdir(parents=True, exist_ok=True)
    target = Path(args.target)
    results = WORK / "scale-results"
    studies = []
    for r in range(args.rounds):
        # Alternate which mode goes first, so drift of the disk lands on both.
        order = modes if r % 2 == 0 else list(reversed(modes))
        for mode in order:
            s = run_study(args, mode, target, results)
            studies.append(s)
            print(
                f"round {r + 1} {mode}: max passing tiles {s['max_passing_tiles']} "
                f"({s['runs_used']} runs, {s['wall_s']} s)",
                flush=True,
            )
    now = datetime.now()
    tilemark = str(ROOT / ".venv" / "bin" / "tilemark")
    report = {
        "schema": SCHEMA,
        "date": now.strftime("%Y-%m-%d"),
        "argv": [Path(sys.argv[0]).name, *sys.argv[1:]],
        "machine": tb.machine_notes(tb.Settings(tilemark, tb.DEFAULT_FIO))
        | {
            "host": socket.gethostname(),
            "kernel": platform.release(),
            "cpus": os.cpu_count(),
        },
        "target": str(target),
        "capacity": args.capacity,
        "tiles": args.tiles,
        "duration": args.duration,
        "warmup": args.warmup,
        "modes": modes,
        "studies": studies,
    }
    json_path, md_path = tb.write_results(
        Path(args.out), "scale-repeat", report, markdown(report), when=now, indent=2
    )
    print(markdown(report))
    print(f"results: {json_path}, {md_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
