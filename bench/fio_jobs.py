"""fio's own example jobs, run by fio and by tilemark (`tilemark run JOB.fio`), side by side.

Does a translated fio job (docs/fio.md) drive the storage like the job itself? For every
example of fio's `examples/` directory that translates (or those named with --jobs), the
script makes one runnable job file for both tools: the job's files replaced by one target
(`filename`, `size`; jobs that made files of their own share it), its time cut to seconds
(`time_based`, `runtime`, `ramp_time` in a [global] put first; `startdelay`, byte counts and
loops dropped, so every job, and every phase of a stonewalled file, runs `--runtime` seconds;
files whose phases end by a count, exit_what and strided sequences, keep number_ios and
io_size and run without time_based),
`group_reporting` dropped so fio reports each job (kept where a steady-state criterion
needs it). Everything else is the example as shipped: engine, direct or buffered, sizes,
depths, mixes, rates, phases. Then fio and tilemark run it alternately REPS times on each rig:

- `ramdisk`: a loop device over a file in /dev/shm (vs_fio.py's RAM disk, its own image), so
  the tools and not a disk decide;
- `file`: a file on the file system of --file-dir (ext4 over the VM's disk on the development
  machines); fio and tilemark each get a file of their own there (tilemark writes only files
  it created), of the same size, laid out before the first run (fio's written in full by the
  script, as tilemark writes its own).

It compares per file: IOPS and MB/s (the sum over jobs of each job's rate over its own time,
fio's `iops`/`bw_bytes` and tilemark's per-stream totals), and p50/p99 latency of the first
job's main operation (fio's `lat_ns`, submission to completion, with --lat_percentiles=1;
tilemark's service time). A figure is within noise when tilemark's median lies inside the
range of fio's own repetitions widened by 3%.

    sudo .venv/bin/python bench/fio_jobs.py --examples /path/to/fio/examples --reps 3

Results: bench/results/<date>-<time>-fio-jobs.{json,md}; docs/fio.md explains the differences.
fio's example files are read from --examples, never copied into this repository.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

# The RAM disk, child runs and machine notes, once vs_fio.py's; the name stays `vs_fio` here
# so that the branches editing this file merge (rename it to `tb` after they have).
import tmbench as vs_fio

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
# Options that decide where, how long and how much; the script sets them for every job.
REPLACED = (
    "filename",
    "directory",
    "size",
    "filesize",
    "io_size",
    "io_limit",
    "number_ios",
    "loops",
    "runtime",
    "timeout",
    "time_based",
    "ramp_time",
    "startdelay",
    "group_reporting",
    "offset_increment",
    # fio 3.33 hung (never ended, SIGTERM ignored) on fixed-rate-submission with
    # io_submit_mode=offload and time_based; tilemark's translation only notes the option.
    "io_submit_mode",
    # numa.fio names node 1, which fio refuses on a one-node machine; tilemark notes the
    # options (it places its own threads), so without them both run the same IO.
    "numa_cpu_nodes",
    "numa_mem_policy",
)
# Files whose end is a count, not a time: exit_what other than group ends phases by a job's
# own count (the translation refuses it with fixed phase times) and a strided sequence refuses
# time_based. They keep their counts (number_ios, io_size) and run without time_based.
COUNTED = re.compile(r"(?m)^\s*(exit_what\s*=|random_sequence_stride\s*=\s*[1-9])")
KEPT_WHEN_COUNTED = ("number_ios", "io_size")
# A steady-state criterion (ss) is judged per group in tilemark, which is fio's rule with
# group_reporting only: such files keep it (fio then reports the group as one job).
STEADY = re.compile(r"(?m)^\s*(ss|steadystate)\s*=")
NOISE_MARGIN = 0.03
RAMDISK_IMAGE = Path("/dev/shm/tilemark-fio-jobs-ram.img")
# Every job's rows so far, in case a later step fails (bench/work is not committed).
PARTIAL = REPO / "bench" / "work" / "fio-jobs-partial.json"


def runnable(job: Path, target: str, size: int, runtime: float, ramp: float) -> str:
    """The example with its files and time replaced (the same text for both tools but the
    target)."""
    text = job.read_text()
    phased = re.search(r"(?m)^\s*(stonewall|wait_for)\b", text) is not None
    counted = COUNTED.search(text) is not None
    steady = STEADY.search(text) is not None
    kept = []
    for line in text.splitlines():
        key = re.split(r"[=\s;#]", line.strip(), maxsplit=1)[0].lower()
        if (
            key not in REPLACED
            or (counted and key in KEPT_WHEN_COUNTED)
            or (steady and key == "group_reporting")
        ):
            kept.append(line)
    head = ["[global]", f"filename={target}", f"size={size}"]
    if not counted:
        head += [
            "time_based",
            f"runtime={runtime:g}",
            # fio ramps each job at its own start, tilemark once per run: phased files run
            # without a ramp so that both measure the same time.
            f"ramp_time={0 if phased else ramp:g}",
        ]
    return "\n".join(head + kept) + "\n"


def fio_side(text: str) -> str:
    """fio runs the job as written, except cpp_null (fio's C++ example engine, not built into
    Debian's fio), which is the null engine the translation runs it as."""
    return re.sub(r"(?m)^(\s*ioengine\s*=\s*)cpp_null\b", r"\g<1>null", text)


def _pct(op: dict[str, Any], pct: str) -> float | None:
    values = (op.get("lat_ns") or {}).get("percentile") or {}
    ns = values.get(pct)
    return None if ns is None else ns / 1000


@dataclass
class Child:
    """One finished run of a tool: its command, exit status and output."""

    cmd: list[str]
    exit_code: int
    stdout: str
    stderr: str


def run_child(cmd: list[str], timeout: float, cwd: Path | None = None) -> Child:
    """Run cmd in a session of its own; past `timeout` seconds kill the whole session (fio
    forks its jobs, and a hung fio ignores SIGTERM)."""
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        err += f"\nkilled after {timeout:g} s"
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return Child(cmd, proc.returncode, out, err)


def fio_figures(child: Child) -> dict[str, Any] | None:
    text = child.stdout
    if child.exit_code != 0 or "{" not in text:
        return None
    jobs = json.loads(text[text.index("{") :])["jobs"]
    first = jobs[0]
    op = first["read"] if first["read"]["total_ios"] else first["write"]
    return {
        "iops": sum(j["read"]["iops"] + j["write"]["iops"] for j in jobs),
        "mbps": sum(j["read"]["bw_bytes"] + j["write"]["bw_bytes"] for j in jobs) / 1e6,
        "p50_us": _pct(op, "50.000000"),
        "p99_us": _pct(op, "99.000000"),
    }


def tilemark_figures(results: Path, child: Child) -> dict[str, Any] | None:
    if child.exit_code != 0:
        return None
    newest = max(results.glob("*/run.json"), key=lambda p: p.stat().st_mtime)
    streams = json.loads(newest.read_text())["summary"]["streams"]
    first = streams[0]
    op = first["read"] or first["write"]
    service = (op or {}).get("service") or {}

    def us(ms: float | None) -> float | None:
        return None if ms is None else ms * 1000

    return {
        "iops": sum(s["total"]["iops"] for s in streams),
        "mbps": sum(s["total"]["mbps"] for s in streams),
        "p50_us": us(service.get("p50_ms")),
        "p99_us": us(service.get("p99_ms")),
    }


FIGURES = ("iops", "mbps", "p50_us", "p99_us")


def compare(runs: dict[str, list[dict[str, Any] | None]]) -> dict[str, Any]:
    """Per figure: both medians, tilemark/fio, fio's own spread, and whether tilemark is
    within fio's range of repetitions widened by NOISE_MARGIN."""
    out: dict[str, Any] = {}
    for figure in FIGURES:
        fio = [r[figure] for r in runs["fio"] if r and r.get(figure) is not None]
        tm = [r[figure] for r in runs["tilemark"] if r and r.get(figure) is not None]
        if not fio or not tm:
            out[figure] = None
            continue
        fio_med, tm_med = statistics.median(fio), statistics.median(tm)
        low, high = min(fio) * (1 - NOISE_MARGIN), max(fio) * (1 + NOISE_MARGIN)
        out[figure] = {
            "fio": fio_med,
            "tilemark": tm_med,
            "ratio": tm_med / fio_med if fio_med else None,
            "fio_spread": (max(fio) - min(fio)) / fio_med if fio_med else None,
            "tilemark_spread": (max(tm) - min(tm)) / tm_med if tm_med else None,
            "within_noise": low <= tm_med <= high,
        }
    return out


def run_job(
    args: argparse.Namespace, job: Path, rig: str, targets: dict[str, str], work: Path
) -> dict[str, Any]:
    texts = {
        tool: runnable(job, targets[tool], args.size, args.runtime, args.ramp)
        for tool in ("fio", "tilemark")
    }
    texts["fio"] = fio_side(texts["fio"])
    paths = {}
    for tool, text in texts.items():
        paths[tool] = work / f"{tool}-{job.name}"
        paths[tool].write_text(text)
    results = work / "results"
    runs: dict[str, list[dict[str, Any] | None]] = {"fio": [], "tilemark": []}
    errors: list[str] = []
    timeout = 120 + 10 * 4 * (args.runtime + args.ramp)  # four phases at most, and layout
    # The machine is shared: the CPU and IO pressure around each job say what else ran.
    load = {"before": vs_fio.load_now()}
    for rep in range(args.reps):
        order = ("fio", "tilemark") if rep % 2 == 0 else ("tilemark", "fio")
        for tool in order:
            if tool == "fio":
                # --verify_state_save=0: fio would leave a verify state file in the cwd.
                cmd = [
                    args.fio,
                    "--output-format=json",
                    "--lat_percentiles=1",
                    "--verify_state_save=0",
                    str(paths[tool]),
                ]
                # In the scratch directory: the examples' write_*_log files land in fio's
                # working directory, which must not be the checkout.
                child = run_child(cmd, timeout, cwd=work)
                figures = fio_figures(child)
            else:
                cmd = [args.tilemark, "run", str(paths[tool]), "--results", str(results)]
                if targets[tool].startswith("/dev/"):
                    cmd += ["--destroy-data", targets[tool], "--force"]
                child = run_child(cmd, timeout)
                figures = tilemark_figures(results, child)
            if figures is None:
                errors.append(f"{tool}: {shlex.join(child.cmd)}: {child.stderr[-600:]}")
                print(f"  {tool} failed: {child.stderr[-300:]}", flush=True)
            runs[tool].append(figures)
            shown = figures and round(figures["iops"])
            print(f"  {rig} {job.name} rep {rep} {tool}: {shown} IOPS", flush=True)
    load["after"] = vs_fio.load_now()
    return {
        "job": job.name,
        "rig": rig,
        "load": load,
        "runs": runs,
        "errors": errors,
        "job_text": texts["tilemark"],
        "figures": compare(runs),
    }


def write_full(path: Path, size: int) -> None:
    """Write the whole file with random bytes (no extent left unwritten)."""
    chunk = 1 << 20
    with open(path, "wb") as f:
        for _ in range(size // chunk):
            f.write(os.urandom(chunk))
        f.write(os.urandom(size % chunk))
        f.flush()
        os.fsync(f.fileno())


def translated_examples(examples: Path) -> list[Path]:
    """The example files that translate (with the environment as it is)."""
    from tilemark.fio.translate import examine

    return [p for p in sorted(examples.glob("*.fio")) if examine(p).translation is not None]


def _cell(f: dict[str, Any] | None, digits: int = 0) -> str:
    if f is None:
        return "-"
    mark = "" if f["within_noise"] else " *"
    return f"{f['fio']:,.{digits}f} / {f['tilemark']:,.{digits}f} ({f['ratio']:.2f}){mark}"


def _pressure(row: dict[str, Any]) -> str:
    """avg10 CPU and IO 'some' pressure when the job's runs ended (what else the machine ran)."""
    after = (row.get("load") or {}).get("after") or {}
    cpu, io = after.get("cpu_some_avg10"), after.get("io_some_avg10")
    return "-" if cpu is None else f"{cpu:.0f} / {io:.0f}"


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        f"# fio's example jobs: fio vs `tilemark run JOB.fio`, {doc['date']}",
        "",
        f"`{doc['command']}`; fio examples at {doc['examples']}; {doc['reps']} alternating "
        f"repetitions of {doc['runtime']:g} s per job (and per phase) after a {doc['ramp']:g} s "
        "ramp (none in stonewalled files), every job on one target of "
        f"{doc['size'] / 2**20:g} MiB. Cells: fio median / tilemark median (tilemark/fio); "
        f"`*`: tilemark's median is outside fio's own range widened by {NOISE_MARGIN:.0%}. "
        "IOPS and MB/s are summed over jobs, each over its own time; latency is the first "
        "job's main operation, fio's lat (submission to completion) against tilemark's service "
        "time, in microseconds. Pressure: /proc/pressure cpu and io `some avg10` when the "
        "job's runs ended (the machine is shared).",
    ]
    for rig, where in doc["rigs"].items():
        rows = [r for r in doc["jobs"] if r["rig"] == rig]
        within = sum(
            all(f is None or f["within_noise"] for f in r["figures"].values()) for r in rows
        )
        lines += [
            "",
            f"## {rig}: {where}",
            "",
            f"{within} of {len(rows)} jobs within noise on every figure.",
            "",
            "| job | IOPS | MB/s | p50 us | p99 us | cpu/io pressure % |",
            "|---|---|---|---|---|---|",
        ]
        for r in rows:
            f = r["figures"]
            if r["errors"] and not any(f.values()):
                lines.append(f"| {r['job']} | failed: {r['errors'][0][:120]} | | | | |")
                continue
            lines.append(
                f"| {r['job']} | {_cell(f['iops'])} | {_cell(f['mbps'], 1)} | "
                f"{_cell(f['p50_us'], 1)} | {_cell(f['p99_us'], 1)} | {_pressure(r)} |"
            )
    lines += ["", f"Load before: {doc['load_before']}", f"Load after: {doc['load_after']}"]
    lines += ["", "Machine: " + json.dumps(doc["machine"], default=str)[:1500], ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--examples", type=Path, required=True, help="fio's examples/ directory")
    p.add_argument(
        "--jobs", default="", help="comma-separated example files (default: all that translate)"
    )
    p.add_argument("--rigs", default="ramdisk,file", help="ramdisk, file or both")
    p.add_argument(
        "--file-dir",
        type=Path,
        default=Path("/var/tmp"),
        help="directory of the file rig (default /var/tmp)",
    )
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--runtime", type=float, default=3.0)
    p.add_argument("--ramp", type=float, default=1.0)
    p.add_argument("--size", type=vs_fio.parse_size, default=vs_fio.parse_size("512m"))
    p.add_argument("--ramdisk", type=vs_fio.parse_size, default=vs_fio.parse_size("1g"))
    p.add_argument("--fio", default=vs_fio.DEFAULT_FIO)
    p.add_argument("--tilemark", default=None)
    args = p.parse_args(argv)
    args.tilemark = vs_fio.find_tilemark(args.tilemark)
    vs_fio.check_fio(args.fio)
    if args.jobs:
        jobs = [args.examples / name for name in args.jobs.split(",")]
    else:
        jobs = translated_examples(args.examples)
    rigs = [r for r in args.rigs.split(",") if r]
    rows: list[dict[str, Any]] = []
    where: dict[str, str] = {}
    load_before = vs_fio.load_now()
    PARTIAL.parent.mkdir(parents=True, exist_ok=True)
    machine: dict[str, Any] = {}

    def settings(target: str, device: bool) -> vs_fio.Settings:
        return vs_fio.Settings(
            tilemark=args.tilemark,
            fio=args.fio,
            size=args.size,
            duration=args.runtime,
            warmup=args.ramp,
            reps=args.reps,
            target=target,
            device=device,
        )

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        if "ramdisk" in rigs:
            with vs_fio.ramdisk(args.ramdisk, RAMDISK_IMAGE) as ram:  # not vs_fio.py's image
                device = ram["device"]
                where["ramdisk"] = (
                    f"loop device {device} over {args.ramdisk / 2**30:g} GiB in tmpfs"
                )
                for job in jobs:
                    targets = {"fio": device, "tilemark": device}
                    rows.append(run_job(args, job, "ramdisk", targets, work))
                    PARTIAL.write_text(json.dumps(rows, default=str))
                machine["ramdisk"] = {
                    **vs_fio.machine_notes(settings(device, True)),
                    "ramdisk": ram,
                }
        if "file" in rigs:
            folder = Path(tempfile.mkdtemp(prefix="tilemark-fio-jobs-", dir=args.file_dir))
            try:
                files = {"fio": str(folder / "fio.dat"), "tilemark": str(folder / "tilemark.dat")}
                # Written in full before fio's first run, as tilemark lays out its own: fio lays
                # out a file for a write-only first job with fallocate alone (filesetup.c
                # extend_file), and reads of its unwritten extents never reach the disk (ext4
                # returns zeros): flow.fio run alone had 7.7% of fio's reads reach the disk.
                write_full(Path(files["fio"]), args.size)
                mount = vs_fio.run_text(
                    ["findmnt", "-n", "-o", "TARGET,SOURCE,FSTYPE", "-T", str(folder)]
                )
                where["file"] = f"files in {folder} ({mount})"
                for job in jobs:
                    rows.append(run_job(args, job, "file", files, work))
                    PARTIAL.write_text(json.dumps(rows, default=str))
            finally:
                for path in folder.glob("*"):
                    path.unlink()
                folder.rmdir()
            if not machine:
                machine["file"] = vs_fio.machine_notes(settings(str(folder), False))
    date = datetime.now(UTC)
    doc = {
        "date": date.isoformat(timespec="seconds"),
        "command": shlex.join([sys.executable, *sys.argv]),
        "examples": str(args.examples),
        "reps": args.reps,
        "runtime": args.runtime,
        "ramp": args.ramp,
        "size": args.size,
        "rigs": where,
        "load_before": load_before,
        "load_after": vs_fio.load_now(),
        "jobs": rows,
        "machine": machine,
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stem = RESULTS / f"{date:%Y-%m-%d}-{time.strftime('%H%M%S')}-fio-jobs"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1, default=str))
    stem.with_suffix(".md").write_text(markdown(doc))
    print(markdown(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
