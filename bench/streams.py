"""Many streams on the null backend (issue 25): tilemark's own work, the engine's interval
frames against the JSON snapshots they replace, side by side in one invocation.

Cases: 10,000 open-loop streams at 5 IOPS each (40 streams x 250 copies, 50,000 IOPS) and
1,000 at 50 IOPS (4 x 250), 2 engine threads, 1 s intervals, on the null backend, so only
tilemark's work counts; and `tiles100`, 100 tiles of the default tile (1,200 streams, the
product's main path: `tilemark run --tiles 100`) with its QoS monitor, which reads every stream
(on the frames path through a group set per stream). Variants: `frames` (the engine builds
the interval rows and per-group aggregates, engine.Frame) and `json`
(TILEMARK_ENGINE_SNAPSHOTS=json: one JSON document per stream per interval, as before). Each
repetition runs every (case, variant) in a fresh process, the order flipping every
repetition (ABBA), after `settle()`, with the load average and CPU/IO pressure recorded
before each run: the machine is shared.

Per run: achieved IOPS against requested, issue lateness p50/p99/max (summary.issue_lateness:
every open-loop IO's submission minus intended time), IOs more than 1 ms late, wall time of
the whole command (set-up and the end-of-run work included) against the run's duration, CPU of
the process (wait4 rusage), peak RSS (ru_maxrss), and the Python share: the host telemetry's
process CPU minus the engine's IO threads' and its aggregation thread's CPU over the
measurement (% of one CPU); the aggregation thread's share is listed beside it. Reported:
medians per (case, variant) and the json/frames ratios formed per repetition.

    .venv/bin/python bench/streams.py                  # 3 repetitions, 10 s runs
    .venv/bin/python bench/streams.py --reps 1 --duration 5 --cases 1k
    .venv/bin/python bench/streams.py --reps 3 --duration 10 --cases tiles100,tiles100-light,1k

Results: bench/results/<date>-<time>-<host>-streams.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import tmbench as tb
from tilemark.store.results import HostCpu

SCHEMA = "tilemark-bench-streams/1"
CASES = {
    "10k": (40, 250, 5),
    "1k": (4, 250, 50),
    "tiles100": (100, 12, None),
    "tiles100-light": (100, 12, None),
}
# tables, copies, IOPS per stream; tiles: tiles, streams per tile (their own rates)
# tiles100 asks ~250,000 IOPS of the null backend, more than 2 shared cores' engine threads
# issue on time: tiles100-light scales every application to a tenth (~25,000 IOPS, the same
# 1,200 streams and QoS criteria), so the front end's share is measured with an engine on time.
LIGHT = ["mail.mailboxes=100", "oltp.iops=100", "dss.mibps=20", "web.iops=50", "backup.mibps=10"]
TILE_CAPACITY = "2g"  # the least 100 default tiles fit in (1 MiB per application instance)
VARIANTS = ("frames", "json", "base")
# `base` (with --base DIR): the Python front end of DIR (a `git archive BASE python` with this
# build's engine module copied in) on the JSON path, as a tile run took it before every
# consumer read the frames; tile cases only (a base of before then takes frames elsewhere, and
# its frames differ from this engine's).
BASE: Path | None = None
# --base-frames: the base front end on its own default path (frames, with its own engine module
# in DIR) for every case, so that an engine change is measured before and after.
BASE_FRAMES = False
# Seconds of warm-up before the measured duration (--warmup): 0 measures the first seconds too,
# where 10,000 streams' first IOs touch their buffers and statistics for the first time.
WARMUP_S = 0.0
WORK = tb.BENCH / "work" / "streams"


def workload(case: str) -> Path:
    tables, copies, rate = CASES[case]
    lines = [f'target = "{WORK / "t.dat"}"', 'size = "64m"', 'backend = "null"', "threads = 2"]
    for i in range(tables):
        lines += ["[[stream]]", f'name = "s{i}"', 'rw = "randread"', 'bs = "4k"']
        lines += [f"rate = {rate}", "qd = 4", f"copies = {copies}"]
    path = WORK / f"{case}.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def run_once(tilemark: str, case: str, variant: str, duration: float, rep: int) -> dict[str, Any]:
    """One run in a fresh process: its summary's figures, wall, CPU and peak RSS."""
    env = dict(os.environ)
    env.pop("TILEMARK_ENGINE_SNAPSHOTS", None)
    if variant == "base":
        env["PYTHONPATH"] = str(BASE)
    if variant == "json" or (variant == "base" and not BASE_FRAMES):
        env["TILEMARK_ENGINE_SNAPSHOTS"] = "json"
    results = WORK / "results"
    if case.startswith("tiles"):
        what = ["--tiles", str(CASES[case][0]), "--target", str(WORK / "tiles.dat"),
                "--capacity", TILE_CAPACITY, "--backend", "null"]  # fmt: skip
        if case == "tiles100-light":
            what += [arg for knob in LIGHT for arg in ("--set", knob)]
    else:
        what = [str(workload(case))]
    cmd = [tilemark, "run", *what, "--duration", f"{duration:g}", "--warmup", f"{WARMUP_S:g}",
           "--results", str(results), "--json"]  # fmt: skip
    tb.LOGS.mkdir(parents=True, exist_ok=True)
    stem = tb.LOGS / f"streams-{case}-{variant}-{rep}"
    load = tb.load_now()
    started = time.monotonic()
    with open(f"{stem}.out", "wb") as out, open(f"{stem}.err", "wb") as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env, cwd=tb.REPO)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - started
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 3 if case.startswith("tiles") else 0):  # 3: a QoS criterion failed
        raise tb.SetupError(f"{' '.join(cmd)} exited {code}: see {stem}.err")
    doc = json.loads(Path(f"{stem}.out").read_text())
    summary = doc["summary"]
    streams = summary["streams"]
    tables, copies, rate = CASES[case]
    ops = sum((s.get(op) or {}).get("ops", 0) for s in streams for op in ("read", "write", "sync"))
    requested = None if rate is None else tables * copies * rate
    apps = summary.get("applications") or {}
    host = (summary.get("telemetry") or {}).get("host") or {}
    cpu = HostCpu.of(host)
    process, engine_cpu = cpu.process_cpu_pct, cpu.engine_cpu_pct
    # The engine's aggregation thread (a build before it had none: its work ran on the front
    # end's thread, inside the Python share).
    aggregate = cpu.aggregate_cpu_pct or 0.0
    lateness = summary.get("issue_lateness") or {}
    run_dir = Path(doc["run_dir"])
    subprocess.run(["rm", "-rf", str(run_dir)], check=False)
    return {
        "case": case,
        "variant": variant,
        "rep": rep,
        "load": load,
        "streams": len(streams),
        "requested_iops": requested,
        "achieved_iops": ops / summary["duration_s"],
        "rate_ratio": None if requested is None else ops / summary["duration_s"] / requested,
        "qos_verdict": apps.get("verdict"),
        "qos_score": apps.get("score"),
        "ios_issued_late": sum(s.get("ios_issued_late") or 0 for s in streams),
        "lag_max_ms": max((s.get("lag_max_ms") or 0) for s in streams),
        "lateness_p50_us": lateness.get("p50_us"),
        "lateness_p99_us": lateness.get("p99_us"),
        "lateness_max_us": lateness.get("max_us"),
        "wall_s": wall,
        "duration_s": summary["duration_s"],
        "cpu_s": usage.ru_utime + usage.ru_stime,
        "peak_rss_mb": usage.ru_maxrss / 1024,
        "process_cpu_pct": process,
        "engine_cpu_pct": engine_cpu,
        "aggregate_cpu_pct": aggregate,
        "python_cpu_pct": (
            None if process is None or engine_cpu is None else process - engine_cpu - aggregate
        ),
    }


FIGURES = ("achieved_iops", "rate_ratio", "qos_score", "lateness_p50_us", "lateness_p99_us",
           "lateness_max_us", "ios_issued_late", "lag_max_ms", "wall_s", "cpu_s", "peak_rss_mb",
           "python_cpu_pct", "engine_cpu_pct", "aggregate_cpu_pct")  # fmt: skip


def medians(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for case in CASES:
        for variant in VARIANTS:
            mine = [r for r in runs if r["case"] == case and r["variant"] == variant]
            if mine:
                out[f"{case}/{variant}"] = {
                    f: tb.median_or_none([r[f] for r in mine]) for f in FIGURES
                } | {"runs": len(mine)}
    return out


def ratios(runs: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """json / frames and base / frames per repetition, median over repetitions."""
    out: dict[str, dict[str, float | None]] = {}
    for case in CASES:
        for other in ("json", "base"):
            figures = ("wall_s", "cpu_s", "peak_rss_mb", "python_cpu_pct")
            per_rep: dict[str, list[float | None]] = {f: [] for f in figures}
            for rep in sorted({r["rep"] for r in runs}):
                pair = {r["variant"]: r for r in runs if r["case"] == case and r["rep"] == rep}
                if other in pair and "frames" in pair:
                    for f in per_rep:
                        per_rep[f].append(tb.ratio(pair[other][f], pair["frames"][f]))
            if any(per_rep.values()):
                out[f"{case} {other}/frames"] = {
                    f: tb.median_or_none(v) for f, v in per_rep.items()
                }
    return out


def fmt(v: Any, digits: int = 1) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Many streams on the null backend: engine frames vs JSON snapshots (issue 25)",
        "",
        f"Command: `{doc['command']}`. {doc['reps']} repetitions, {doc['duration_s']:g} s runs, "
        "2 engine threads, 1 s intervals, alternating (ABBA). Medians. `frames`: the engine "
        "builds the interval rows and group aggregates; `json`: TILEMARK_ENGINE_SNAPSHOTS=json, "
        "one JSON document per stream per interval (the path every run took before); `base` "
        + (
            f"(--base-frames): {doc.get('base')}, front end and engine module, on its own "
            "default path (frames), for every case: the build before a change."
            if doc.get("base_frames")
            else f"(tile cases, with --base): the front end of {doc.get('base') or 'the base'} "
            "on the JSON path, as tile runs took it before every consumer read the frames."
        ),
        "",
        "| case | variant | IOPS (achieved/requested) | QoS score | lateness p50 / p99 / max us "
        "| IOs >1 ms late | max lag ms | wall s | CPU s | peak RSS MB | Python % of a CPU "
        "| engine IO threads % | engine aggregation % |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, m in doc["medians"].items():
        case, variant = key.split("/")
        lines.append(
            f"| {case} | {variant} | {fmt(m['achieved_iops'], 0)} ({fmt(m['rate_ratio'], 4)}) | "
            f"{fmt(m['qos_score'], 2)} | "
            f"{fmt(m['lateness_p50_us'])} / {fmt(m['lateness_p99_us'])} / "
            f"{fmt(m['lateness_max_us'], 0)} | {fmt(m['ios_issued_late'], 0)} | "
            f"{fmt(m['lag_max_ms'])} | {fmt(m['wall_s'])} | {fmt(m['cpu_s'])} | "
            f"{fmt(m['peak_rss_mb'], 0)} | {fmt(m['python_cpu_pct'])} | "
            f"{fmt(m['engine_cpu_pct'])} | {fmt(m['aggregate_cpu_pct'])} |"
        )
    lines += ["", "json / frames and base / frames, per repetition, median:", ""]
    for case, r in doc["ratios"].items():
        lines.append(
            f"- {case}: wall {fmt(r['wall_s'], 2)}x, CPU {fmt(r['cpu_s'], 2)}x, "
            f"peak RSS {fmt(r['peak_rss_mb'], 2)}x, Python share {fmt(r['python_cpu_pct'], 2)}x"
        )
    lines += ["", "Every run (load before it: loadavg, CPU and IO pressure some avg10 %):", ""]
    lines += ["| case | variant | rep | wall s | CPU s | lateness p99 us | Python % | load |"]
    lines += ["|---|---|---|---|---|---|---|---|"]
    for r in doc["runs"]:
        load = r["load"]
        lines.append(
            f"| {r['case']} | {r['variant']} | {r['rep']} | {fmt(r['wall_s'])} | "
            f"{fmt(r['cpu_s'])} | {fmt(r['lateness_p99_us'])} | {fmt(r['python_cpu_pct'])} | "
            f"{' '.join(load['loadavg'])}; cpu {load['cpu_some_avg10']}%, "
            f"io {load['io_some_avg10']}% |"
        )
    m = doc["machine"]
    lines += ["", f"Machine: {json.dumps({k: m.get(k) for k in ('cpu', 'cpus', 'kernel')})}", ""]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--duration", type=tb.positive_float, default=10.0)
    ap.add_argument("--cases", default="10k,1k", help="comma-separated: " + ", ".join(CASES))
    ap.add_argument("--tilemark", default=None)
    ap.add_argument("--warmup", type=float, default=0.0, help="seconds before the measurement")
    ap.add_argument("--base", type=Path, default=None, help="a base front end (`base` variant)")
    ap.add_argument(
        "--base-frames",
        action="store_true",
        help="run the base on its own default path (frames) for every case",
    )
    ap.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help="comma-separated, in the first repetition's order: " + ", ".join(VARIANTS),
    )
    ap.add_argument("--out", type=Path, default=tb.BENCH / "results")
    args = ap.parse_args(argv)
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        ap.error(f"unknown case(s) {', '.join(unknown)}; known: {', '.join(CASES)}")
    tilemark = tb.find_tilemark(args.tilemark)
    global BASE, BASE_FRAMES, WARMUP_S
    BASE = args.base
    BASE_FRAMES = args.base_frames
    variants = tuple(v for v in args.variants.split(",") if v)
    if not variants or any(v not in VARIANTS for v in variants):
        ap.error(f"--variants takes some of {', '.join(VARIANTS)}")
    WARMUP_S = args.warmup
    WORK.mkdir(parents=True, exist_ok=True)
    runs = []
    for rep in range(args.reps):
        order = variants if rep % 2 == 0 else variants[::-1]
        for case in cases:
            for variant in order:
                if variant == "base" and (
                    BASE is None or not (BASE_FRAMES or case.startswith("tiles"))
                ):
                    continue
                tb.settle()
                r = run_once(tilemark, case, variant, args.duration, rep)
                print(
                    f"{case} {variant} rep {rep}: wall {r['wall_s']:.1f}s cpu {r['cpu_s']:.1f}s "
                    f"rss {r['peak_rss_mb']:.0f}MB lateness p99 {fmt(r['lateness_p99_us'])}us "
                    f"python {fmt(r['python_cpu_pct'])}%",
                    file=sys.stderr,
                    flush=True,
                )
                runs.append(r)
    settings = tb.Settings(tilemark=tilemark, fio="fio")
    doc = {
        "schema": SCHEMA,
        "command": " ".join([".venv/bin/python", "bench/streams.py", *(argv or sys.argv[1:])]),
        "reps": args.reps,
        "base": None if BASE is None else str(BASE),
        "base_frames": BASE_FRAMES,
        "duration_s": args.duration,
        "warmup_s": args.warmup,
        "cases": {
            c: dict(zip(("tables", "copies", "iops_per_stream"), CASES[c], strict=True))
            if not c.startswith("tiles")
            else {"tiles": CASES[c][0], "streams": CASES[c][0] * CASES[c][1]}
            for c in cases
        },
        "medians": medians(runs),
        "ratios": ratios(runs),
        "runs": runs,
        "machine": tb.machine_notes(settings),
        "pressure_after": {k: tb.psi_some(k) for k in ("cpu", "io", "memory")},
    }
    json_path, md_path = tb.write_results(args.out, "streams", doc, markdown(doc))
    print(f"results: {json_path} {md_path}", file=sys.stderr)
    print(md_path.read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
