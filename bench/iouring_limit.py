"""The limit: fio's t/io_uring against tilemark, one thread each (issue 25).

fio's source tree carries t/io_uring, Jens Axboe's minimal io_uring load generator: one thread,
a fixed queue, batched submission and completion, registered files and buffers, nothing else.
What it reaches on one core is what io_uring gives on this machine; tilemark's engine does the
same IOs and also draws offsets, keeps histograms and timestamps, and reports intervals. This
script states tilemark's ratio to it, IOPS and IOPS per CPU-second (the process's CPU over the
measurement: t/io_uring spins up to a whole core, so IOPS alone says little when it has idle
time), side by side in one run, tools alternating:

- `nop`: t/io_uring `-N1` (IORING_OP_NOP: io_uring's own path, no device) against tilemark's
  null backend (no io_uring at all: the engine's own work per IO), QD 128;
- `ram-qdN`: 4 KiB random reads with O_DIRECT of a loop device over random bytes in tmpfs,
  t/io_uring `-p0` (the loop device has no polled queues) against tilemark's uring backend, at
  QD 1, 32 and 128, t/io_uring's submit and complete batches at min(QD, 32) / 4 (its default
  ratio at QD 128 is 32/32; a quarter keeps a deep queue fed);
- the kernel's null block device (`null_blk`, fio's "null block path") is used when the kernel
  has it (/dev/nullb0); this VM's kernel was built without it (CONFIG_BLK_DEV_NULL_BLK unset),
  and the result says so.

t/io_uring is built from the source of the installed fio's version, fetched with `apt-get
source` (a deb-src entry of the machine's own Debian mirror, in a list of this script's own;
the system's sources are not touched) into bench/work/iouring/, or from `--fio-src DIR`.

    sudo .venv/bin/python bench/iouring_limit.py                 # 3 repetitions, 4 s runs
    sudo .venv/bin/python bench/iouring_limit.py --reps 1 --cases nop,ram-qd32

Results: bench/results/<date>-<time>-<host>-iouring-limit.json and .md.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import Any

import tmbench as tb

SCHEMA = "tilemark-bench-iouring-limit/1"
WORK = tb.WORK / "iouring"
RAM_SIZE = 1 << 30
RAM_IMAGE = Path("/dev/shm/tilemark-bench-iouring.img")
NOP_FILE = Path("/dev/shm/tilemark-bench-iouring-null.dat")
CASES = ("nop", "ram-qd1", "ram-qd32", "ram-qd128", "nullb-qd32")
WARMUP_S = 1.0
# t/io_uring with submit and complete batches of 1 (-s1 -c1): each IO handed over and reaped as
# it comes, as fio and tilemark do (tilemark reaps every completion at once because it times
# each IO: waiting for a batch would add the wait to the latencies it reports).
BATCH1 = "t/io_uring -s1 -c1"


# ---------------------------------------------------------------------------------------------
# t/io_uring from fio's source


def fio_version() -> str:
    out = tb.run_text(["fio", "--version"]) or ""
    m = re.match(r"fio-(\d+\.\d+)", out.strip())
    if not m:
        raise tb.SetupError("fio is not installed (`make system-deps` installs it)")
    return m.group(1)


def debian_mirror() -> str:
    """The machine's own Debian mirror and suite, from its deb822 or one-line sources."""
    for path in [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]:
        text = tb.read_text(path) or ""
        uri = re.search(r"^URIs:\s*(\S+)", text, re.M)
        suite = re.search(r"^Suites:\s*(\S+)", text, re.M)
        if uri and suite and "security" not in uri.group(1):
            return f"{uri.group(1)} {suite.group(1)}"
        line = re.search(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+(\S+)", text, re.M)
        if line and "security" not in line.group(1):
            return f"{line.group(1)} {line.group(2)}"
    raise tb.SetupError("no Debian mirror in /etc/apt: give fio's source with --fio-src")


def fetch_fio_source(version: str) -> Path:
    """fio's source of `version` under WORK (apt-get source, download only, then unpacked)."""
    src = WORK / f"fio-{version}"
    if (src / "t" / "io_uring.c").is_file():
        return src
    apt = WORK / "apt"
    (apt / "lists" / "partial").mkdir(parents=True, exist_ok=True)
    keyring = "/usr/share/keyrings/debian-archive-keyring.gpg"
    (apt / "sources.list").write_text(f"deb-src [signed-by={keyring}] {debian_mirror()} main\n")
    opts = ["-q", "-o", f"Dir::Etc::SourceList={apt / 'sources.list'}",
            "-o", "Dir::Etc::SourceParts=/dev/null",
            "-o", f"Dir::State::Lists={apt / 'lists'}"]  # fmt: skip
    debian = tb.run_text(["dpkg-query", "-W", "-f=${Version}", "fio"]) or ""
    for args in (["update"], ["source", "--download-only", f"fio={debian.strip()}"]):
        done = subprocess.run(["apt-get", *opts, *args], cwd=apt, capture_output=True, text=True)
        if done.returncode != 0:
            raise tb.SetupError(f"apt-get {args[0]} failed: {done.stderr.strip()[-300:]}")
    (tarball,) = sorted(apt.glob(f"fio_{version}.orig.tar.*"))[:1] or [None]
    if tarball is None:
        raise tb.SetupError(f"apt-get source fetched no fio_{version}.orig tarball")
    with tarfile.open(tarball) as tar:
        top = tar.getnames()[0].split("/")[0]
        tar.extractall(WORK, filter="data")
    (WORK / top).rename(src)
    return src


def build_t_io_uring(src: Path) -> Path:
    """t/io_uring built in `src` (configured first if it was not)."""
    binary = src / "t" / "io_uring"
    if binary.is_file():
        return binary
    if not (src / "config-host.mak").is_file():
        done = subprocess.run(["./configure"], cwd=src, capture_output=True, text=True)
        if done.returncode != 0:
            raise tb.SetupError(f"fio's configure failed: {done.stderr.strip()[-300:]}")
    done = subprocess.run(["make", f"-j{os.cpu_count() or 1}", "t/io_uring"], cwd=src,
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode != 0 or not binary.is_file():
        raise tb.SetupError(f"building t/io_uring failed: {done.stderr.strip()[-300:]}")
    return binary


# ---------------------------------------------------------------------------------------------
# runs


def case_qd(case: str) -> int:
    return 128 if case == "nop" else int(case.rsplit("qd", 1)[1])


def uring_cmd(
    binary: Path, case: str, target: str, seconds: float, batch: int | None = None
) -> list[str]:
    qd = case_qd(case)
    if batch is None:
        batch = max(1, min(qd, 32) // 4) if case != "nop" else 32
    cmd = [str(binary), f"-d{qd}", f"-s{batch}", f"-c{batch}", f"-r{int(WARMUP_S + seconds)}"]
    cmd += ["-N1"] if case == "nop" else ["-p0", "-B1", "-F1", "-O1", "-R1", "-b4096"]
    return cmd + [target]


def tilemark_cmd(tm: str, case: str, target: str, seconds: float) -> list[str]:
    cmd = [tm, "run", "--threads", "1", "--rw", "randread", "--bs", "4k", "--align", "4k",
           "--qd", str(case_qd(case)), "--duration", f"{seconds:g}", "--warmup", f"{WARMUP_S:g}",
           "--results", str(WORK / "results"), "--json", "--target", target]  # fmt: skip
    if case == "nop":
        return cmd + ["--backend", "null", "--size", "64m"]
    return cmd + ["--size", "1g"]


def run_uring(
    binary: Path, case: str, target: str, seconds: float, rep: int, batch: int | None = None
) -> dict[str, Any]:
    started = time.time()
    cmd = uring_cmd(binary, case, target, seconds, batch)
    child = tb.run_child(cmd, f"iouring-{case}-{rep}-{batch or 'd'}")
    if child.exit_code != 0:
        raise RuntimeError(f"t/io_uring failed: {child.stderr.strip()[-300:]}")
    # One line a second; the first covers the ramp.
    rates = [_rate(m) for m in re.findall(r"^IOPS=([\d.]+[KM]?)", child.stdout, re.M)]
    iops = statistics.median(rates[1:] or rates) if rates else None
    window = tb.window_cpu(child.samples, started + WARMUP_S, started + child.wall_s)
    return _figures(iops, window) | {"cmd": " ".join(child.cmd), "per_second": rates}


def _rate(text: str) -> float:
    scale = {"K": 1e3, "M": 1e6}.get(text[-1], 1.0)
    return float(text.rstrip("KM")) * scale


def run_tilemark(tm: str, case: str, target: str, seconds: float, rep: int) -> dict[str, Any]:
    child = tb.run_child(tilemark_cmd(tm, case, target, seconds), f"iouring-tm-{case}-{rep}")
    if child.exit_code != 0:
        raise RuntimeError(f"tilemark failed: {child.stderr.strip()[-300:]}")
    parsed = tb.parse_tilemark(child)
    window = tb.window_cpu(child.samples, *parsed["window"])
    iops = parsed["metrics"]["iops"]
    return _figures(iops, window) | {"cmd": " ".join(child.cmd)}


def _figures(iops: float | None, window: dict[str, Any] | None) -> dict[str, Any]:
    busy = window["cpu_s"] / window["seconds"] if window and window["seconds"] > 0 else None
    return {
        "iops": iops,
        "cpu_busy": busy,  # CPUs the process kept busy over the window
        "iops_per_cpu_s": iops / busy if iops and busy else None,
        "cpu_us_per_io": tb.cpu_us_per_io(window, iops),
    }


def measure(args: argparse.Namespace, binary: Path, targets: dict[str, str]) -> list[dict]:
    runs = []
    for rep in range(args.reps):
        for case in args.cases:
            if case not in targets:
                continue
            tools = ["t/io_uring", "tilemark"] if rep % 2 == 0 else ["tilemark", "t/io_uring"]
            if case != "nop" and case_qd(case) > 1:
                tools.append(BATCH1)  # submitting and reaping one at a time, as fio and tilemark
            for tool in tools:
                tb.settle()
                load = tb.load_now()
                if tool == "tilemark":
                    r = run_tilemark(args.tilemark, case, targets[case], args.duration, rep)
                else:
                    batch = 1 if tool == BATCH1 else None
                    r = run_uring(binary, case, targets[case], args.duration, rep, batch)
                runs.append({"case": case, "tool": tool, "rep": rep, "load": load, **r})
                print(f"{case:10s} {tool:10s} rep {rep}: {r['iops'] or 0:12,.0f} IOPS, "
                      f"{r['cpu_busy'] or 0:.2f} CPUs busy, "
                      f"{r['iops_per_cpu_s'] or 0:12,.0f} IOPS per CPU-s, "
                      f"cpu some {load['cpu_some_avg10']}%", flush=True)  # fmt: skip
    return runs


def summarize(runs: list[dict]) -> list[dict]:
    rows = []
    for case in dict.fromkeys(r["case"] for r in runs):
        row: dict[str, Any] = {"case": case}
        for tool, key in (("t/io_uring", "uring"), (BATCH1, "uring1"), ("tilemark", "tm")):
            mine = [r for r in runs if r["case"] == case and r["tool"] == tool]
            for f in ("iops", "cpu_busy", "iops_per_cpu_s", "cpu_us_per_io"):
                row[f"{key}_{f}"] = tb.median_or_none([r[f] for r in mine])
        by_rep: dict[int, dict[str, dict]] = {}
        for r in runs:
            if r["case"] == case:
                by_rep.setdefault(r["rep"], {})[r["tool"]] = r
        for f in ("iops", "iops_per_cpu_s"):
            ratios = [tb.ratio(p["tilemark"][f], p["t/io_uring"][f]) for p in by_rep.values()
                      if "tilemark" in p and "t/io_uring" in p]  # fmt: skip
            row[f"ratio_{f}"] = tb.median_or_none(ratios)
            row[f"ratio_{f}_spread"] = tb.spread(ratios)
        rows.append(row)
    return rows


def _n(v: float | None, fmt: str = ",.0f") -> str:
    return "-" if v is None else format(v, fmt)


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        f"# The limit: fio's t/io_uring against tilemark ({m['date']})", "",
        f"`{doc['command']}` on {m['hostname']}: kernel {m['kernel']}, {m['cpus']} CPUs, "
        f"fio-{doc['fio_version']} (t/io_uring built from its Debian source), "
        f"{doc['tilemark_version']}. {doc['reps']} repetitions of {doc['duration_s']:g} s after "
        f"{WARMUP_S:g} s, one thread each, tools alternating; medians, ratios per repetition.",
        "",
        "IOPS per CPU-s = IOPS over the CPUs the process kept busy in the measurement (process "
        "CPU time / wall time): what one fully used core would reach at that cost per IO. "
        "`nop`: t/io_uring's IORING_OP_NOP against tilemark's null backend (no device). "
        "`ram-qdN`: 4 KiB random O_DIRECT reads of a loop device over tmpfs; t/io_uring "
        "submits and reaps in batches of a quarter of the queue (up to 8), and once more "
        "one IO at a time (`-s1 -c1`), as fio and tilemark do. Ratios: tilemark / t/io_uring "
        "with its batches.", "",
        "| case | t/io_uring IOPS | CPUs busy | IOPS per CPU-s | t/io_uring -s1 -c1 IOPS "
        "| tilemark IOPS | CPUs busy | IOPS per CPU-s | ratio IOPS | ratio IOPS per CPU-s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for r in doc["rows"]:
        lines.append(
            f"| {r['case']} | {_n(r['uring_iops'])} | {_n(r['uring_cpu_busy'], '.2f')} "
            f"| {_n(r['uring_iops_per_cpu_s'])} | {_n(r['uring1_iops'])} | {_n(r['tm_iops'])} "
            f"| {_n(r['tm_cpu_busy'], '.2f')} | {_n(r['tm_iops_per_cpu_s'])} "
            f"| {_n(r['ratio_iops'], '.3f')} | {_n(r['ratio_iops_per_cpu_s'], '.3f')} |"
        )
    lines += ["", *[f"- {n}" for n in doc["notes"]], "", "Every run:", "",
              "| case | tool | rep | IOPS | CPUs busy | IOPS per CPU-s | cpu/io PSI % |",
              "|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in doc["runs"]:
        lines.append(
            f"| {r['case']} | {r['tool']} | {r['rep']} | {_n(r['iops'])} "
            f"| {_n(r['cpu_busy'], '.2f')} | {_n(r['iops_per_cpu_s'])} "
            f"| {r['load']['cpu_some_avg10']}/{r['load']['io_some_avg10']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--duration", type=tb.positive_float, default=4.0)
    p.add_argument("--cases", default=",".join(CASES))
    p.add_argument("--fio-src", type=Path, help="a fio source tree (default: apt-get source)")
    p.add_argument("--tilemark", default=None)
    p.add_argument("--out", type=Path, default=tb.RESULTS_DIR)
    args = p.parse_args(argv)
    args.cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    bad = [c for c in args.cases if c not in CASES]
    if bad:
        p.error(f"--cases: {', '.join(bad)} not among {', '.join(CASES)}")
    try:
        args.tilemark = tb.find_tilemark(args.tilemark)
        version = fio_version()
        WORK.mkdir(parents=True, exist_ok=True)
        src = args.fio_src or fetch_fio_source(version)
        binary = build_t_io_uring(src)
        notes = [f"t/io_uring: {binary} (fio {version} source)"]
        with tb.ramdisk(RAM_SIZE, RAM_IMAGE) as ram:
            targets = {c: ram["device"] for c in args.cases if c.startswith("ram-")}
            NOP_FILE.write_bytes(b"\0" * (64 << 20))
            targets["nop"] = str(NOP_FILE)
            if Path("/dev/nullb0").is_block_device():
                targets["nullb-qd32"] = "/dev/nullb0"
            elif "nullb-qd32" in args.cases:
                notes.append("nullb-qd32 not run: this kernel has no null_blk device "
                             "(/dev/nullb0; CONFIG_BLK_DEV_NULL_BLK)")  # fmt: skip
            try:
                runs = measure(args, binary, targets)
            finally:
                NOP_FILE.unlink(missing_ok=True)
            settings = tb.Settings(args.tilemark, "fio", RAM_SIZE, args.duration, WARMUP_S,
                                   args.reps, target=ram["device"])  # fmt: skip
            machine = tb.machine_notes(settings, {"ramdisk": ram})
    except tb.SetupError as e:
        print(f"iouring_limit: {e}", file=sys.stderr)
        return 2
    doc = {
        "schema": SCHEMA,
        "command": " ".join(["bench/iouring_limit.py", *(argv or sys.argv[1:])]),
        "machine": machine,
        "fio_version": version,
        "tilemark_version": tb.run_text([args.tilemark, "--version"]),
        "reps": args.reps,
        "duration_s": args.duration,
        "notes": notes,
        "rows": summarize(runs),
        "runs": runs,
    }
    json_path, md_path = tb.write_results(args.out, "iouring-limit", doc, markdown(doc))
    print(f"results: {json_path}, {md_path.suffix}")
    return 0


if __name__ == "__main__":
    if shutil.which("apt-get") is None and "--fio-src" not in sys.argv:
        print(
            "iouring_limit: apt-get is missing: give fio's source with --fio-src", file=sys.stderr
        )
        sys.exit(2)
    sys.exit(main())
