"""fio's own example jobs, run by fio and by tilemark (`tilemark run JOB.fio`), side by side.

Does a translated fio job (docs/fio.md) drive the storage like the job itself? For each job,
the script points it at a RAM disk (a loop device over tmpfs, vs_fio.py's --ramdisk, so the
tools and not a disk decide), fixes the time (`time_based`, runtime, ramp_time) and the region
(`size`), and runs fio and tilemark alternately REPS times. Jobs run with `direct=1`: this
compares the engines, and buffered IO would compare page-cache policies instead (fio drops a
buffered job's cache again after every pass over its file when time_based, io_u.c
loop_cache_invalidate(); tilemark drops it once, before the run). `--as-written` keeps the jobs'
own direct/buffered setting. It compares each tool's own IOPS
(fio: the jobs' read + write IOPS; tilemark: the run's total) and fio's spread across its own
repetitions: the translated job is "within noise" when tilemark's median lies within fio's
range widened by 3%.

    sudo .venv/bin/python bench/fio_jobs.py --reps 3 --runtime 5

Results: bench/results/<date>-<host>-fio-jobs.{json,md}. The machine notes are vs_fio.py's.
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The RAM disk, child runs and machine notes, once vs_fio.py's; the name stays `vs_fio` here
# so that the branches editing this file merge (rename it to `tb` after they have).
import tmbench as vs_fio

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "tests" / "data" / "fio-examples"
RESULTS = REPO / "bench" / "results"
JOBS = [
    "fio-rand-read.fio",  # buffered 4k random reads, libaio QD16
    "fio-seq-write.fio",  # buffered 256k sequential writes, QD16
    "fio-rand-RW.fio",  # buffered 4k random 60/40, QD16, numjobs=4
    "iometer-file-access-server.fio",  # direct, bssplit, 80/20, QD64
    "zipf.fio",  # null engine, zipf placement
]
# Options that decide where and how long; the script sets them for every job.
PLACEMENT = ("filename", "directory", "size", "runtime", "timeout", "time_based", "ramp_time")
NOISE_MARGIN = 0.03


def on_ramdisk(
    job: Path, device: str, size: int, runtime: float, ramp: float, *, as_written: bool
) -> str:
    """The job file with its files and time replaced: every job on DEVICE's first SIZE bytes."""
    replaced = PLACEMENT if as_written else (*PLACEMENT, "direct", "buffered")
    kept = []
    for line in job.read_text().splitlines():
        key = re.split(r"[=\s;#]", line.strip(), maxsplit=1)[0].lower()
        if key not in replaced:
            kept.append(line)
    head = [
        "[global]",
        f"filename={device}",
        f"size={size}",
        "time_based",
        f"runtime={runtime:g}",
        f"ramp_time={ramp:g}",
        *([] if as_written else ["direct=1"]),
    ]
    return "\n".join(head + kept) + "\n"


def fio_iops(child: vs_fio.ChildRun) -> float | None:
    text = child.stdout
    if child.exit_code != 0 or "{" not in text:
        return None
    jobs = json.loads(text[text.index("{") :])["jobs"]
    return sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs)


def tilemark_iops(results: Path, child: vs_fio.ChildRun) -> float | None:
    if child.exit_code != 0:
        return None
    newest = max(results.glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    return json.loads(newest.read_text())["summary"]["total"]["iops"]


def same_engine(text: str) -> str:
    """The job with fio's async engines set to io_uring, the engine tilemark runs them on, so
    that the comparison is of the translation and the engines' io_uring loops, not of libaio
    against io_uring (fio's sync engines and null are kept: tilemark uses the same)."""
    return re.sub(r"(?m)^(\s*ioengine\s*=\s*)(libaio|posixaio)\b", r"\g<1>io_uring", text)


def run_job(args: argparse.Namespace, name: str, device: str, work: Path) -> dict[str, Any]:
    text = on_ramdisk(
        EXAMPLES / name, device, args.size, args.runtime, args.ramp, as_written=args.as_written
    )
    if args.same_engine:
        text = same_engine(text)
    job = work / name
    job.write_text(text)
    results = work / "results"
    runs: dict[str, list[float | None]] = {"fio": [], "tilemark": []}
    for rep in range(args.reps):
        order = ("fio", "tilemark") if rep % 2 == 0 else ("tilemark", "fio")
        for tool in order:
            stem = f"fio-jobs-{Path(name).stem}-{tool}-{rep}"
            if tool == "fio":
                child = vs_fio.run_child([args.fio, "--output-format=json", str(job)], stem)
                iops = fio_iops(child)
            else:
                cmd = [args.tilemark, "run", str(job), "--results", str(results)]
                cmd += ["--destroy-data", device, "--force"]
                child = vs_fio.run_child(cmd, stem)
                iops = tilemark_iops(results, child)
            if iops is None:
                print(f"  {tool} failed: {shlex.join(child.cmd)}\n{child.stderr[-800:]}")
            runs[tool].append(iops)
            print(f"  {name} rep {rep} {tool}: {iops and round(iops)} IOPS", flush=True)
    fio_ok = [v for v in runs["fio"] if v]
    tm_ok = [v for v in runs["tilemark"] if v]
    row: dict[str, Any] = {"job": name, "runs": runs, "job_text": text}
    if fio_ok and tm_ok:
        fio_med, tm_med = statistics.median(fio_ok), statistics.median(tm_ok)
        low, high = min(fio_ok) * (1 - NOISE_MARGIN), max(fio_ok) * (1 + NOISE_MARGIN)
        row.update(
            fio_median=fio_med,
            tilemark_median=tm_med,
            ratio=tm_med / fio_med,
            fio_spread=(max(fio_ok) - min(fio_ok)) / fio_med,
            within_noise=low <= tm_med <= high,
        )
    return row


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# fio example jobs: fio vs `tilemark run JOB.fio`, {doc['date']}",
        "",
        f"`{doc['command']}`; RAM disk {doc['ramdisk']}; {doc['reps']} alternating "
        f"repetitions of {doc['runtime']:g} s after {doc['ramp']:g} s ramp; "
        f"{'direct/buffered as the jobs say' if doc['as_written'] else 'every job direct=1'}; "
        f"{'fio on io_uring where the job says libaio; ' if doc.get('same_engine') else ''}"
        "IOPS from each "
        "tool's own report. Within noise: tilemark's median inside fio's range of its own "
        f"repetitions widened by {NOISE_MARGIN:.0%}.",
        "",
        "| job | fio IOPS (median) | fio spread | tilemark IOPS (median) | tilemark/fio "
        "| within noise |",
        "|---|---|---|---|---|---|",
    ]
    for r in doc["jobs"]:
        if "ratio" not in r:
            lines.append(f"| {r['job']} | failed | | | | |")
            continue
        lines.append(
            f"| {r['job']} | {r['fio_median']:,.0f} | {r['fio_spread']:.1%} | "
            f"{r['tilemark_median']:,.0f} | {r['ratio']:.2f} | "
            f"{'yes' if r['within_noise'] else 'no'} |"
        )
    notes = doc["machine"]
    lines += ["", f"Load after the runs: {doc['loadavg_after']}; pressure: {doc['pressure_after']}"]
    lines += ["", "Machine: " + json.dumps(notes, default=str)[:1500], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=float, default=5.0)
    p.add_argument("--ramp", type=float, default=1.0)
    p.add_argument("--size", type=vs_fio.parse_size, default=vs_fio.parse_size("512m"))
    p.add_argument("--ramdisk", type=vs_fio.parse_size, default=vs_fio.parse_size("1g"))
    p.add_argument("--jobs", default=",".join(JOBS), help="comma-separated example job files")
    p.add_argument("--fio", default=vs_fio.DEFAULT_FIO)
    p.add_argument(
        "--same-engine",
        action="store_true",
        help="run fio's libaio/posixaio jobs on io_uring too, as tilemark does",
    )
    p.add_argument(
        "--as-written",
        action="store_true",
        help="keep each job's direct/buffered setting (default: direct=1, comparing engines)",
    )
    p.add_argument("--tilemark", default=None)
    args = p.parse_args(argv)
    args.tilemark = vs_fio.find_tilemark(args.tilemark)
    vs_fio.check_fio(args.fio)
    rows = []
    with vs_fio.ramdisk(args.ramdisk) as ram, tempfile.TemporaryDirectory() as tmp:
        for name in args.jobs.split(","):
            rows.append(run_job(args, name, ram["device"], Path(tmp)))
        settings = vs_fio.Settings(
            tilemark=args.tilemark,
            fio=args.fio,
            size=args.size,
            duration=args.runtime,
            warmup=args.ramp,
            reps=args.reps,
            target=ram["device"],
            device=True,
        )
        machine = vs_fio.machine_notes(settings, {"ramdisk": ram})
    date = datetime.now(UTC)
    doc = {
        "date": date.isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, *sys.argv]),
        "reps": args.reps,
        "runtime": args.runtime,
        "ramp": args.ramp,
        "ramdisk": f"{args.ramdisk / 2**30:g} GiB, jobs on its first {args.size / 2**20:g} MiB",
        "as_written": args.as_written,
        "same_engine": args.same_engine,
        "pressure_after": {k: vs_fio.read_text(f"/proc/pressure/{k}") for k in ("cpu", "io")},
        "loadavg_after": vs_fio.read_text("/proc/loadavg"),
        "jobs": rows,
        "machine": machine,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    kind = "fio-jobs-as-written" if args.as_written else "fio-jobs"
    kind += "-same-engine" if args.same_engine else ""
    stem = RESULTS / f"{date:%Y-%m-%d}-{time.strftime('%H%M%S')}-{kind}"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str))
    stem.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0 if all(r.get("within_noise") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
