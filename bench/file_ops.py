"""File and metadata operations: tilemark's file streams (psync and io_uring backends) beside
the same system calls in the plainest C loop (bench/fileops/ref.c), at equal concurrency, on
tmpfs and on ext4 and xfs loop devices (issue 26: metadata rates >= 0.95x the reference, CPU
per operation reported). mdtest and elbencho have no Debian package here, so the reference is
the loop the issue names as the fallback.

Two cases, each at --threads clients in one shared flat directory:
- `stat`: fstatat of a random file among --files (tilemark: ops = "stat");
- `cycle`: create (openat O_CREAT|O_EXCL), close, unlink of a random existing file (tilemark:
  sequence = "create,close,delete" over a set of 2 x --files entries, half present; the
  reference's threads each keep --files / threads files and unlink a random one of theirs).

Tools alternate within every repetition (the order rotates), each runs --seconds; rates are
calls of the case's first kind per second (stat/s, or create+close+delete cycles/s), CPU per
operation is the process's CPU time (user + system, every thread) over the run divided by them.
tilemark runs in this process through the engine, so its CPU covers the engine's threads and
the light polling; prepare is not timed. Needs root (loop devices) for ext4/xfs.

    .venv/bin/python bench/file_ops.py --reps 3 --seconds 2
    .venv/bin/python bench/file_ops.py --pool bench/results/X-file-ops.json   # pooled ratios
"""

from __future__ import annotations

import argparse
import json
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

SCHEMA = "tilemark-bench-file-ops/1"
REF_SRC = tb.BENCH / "fileops" / "ref.c"


def psi() -> dict[str, str]:
    out = {}
    for kind in ("cpu", "io"):
        try:
            out[kind] = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
        except OSError:
            out[kind] = "unavailable"
    return out


def psi_avg10() -> tuple[float, float]:
    """CPU and IO pressure (`some`, avg10, %) now; -1 where the kernel has none."""
    out = []
    for kind in ("cpu", "io"):
        try:
            line = Path(f"/proc/pressure/{kind}").read_text().splitlines()[0]
            out.append(float(line.split()[1].split("=")[1]))
        except (OSError, IndexError, ValueError):
            out.append(-1.0)
    return out[0], out[1]


def build_ref(work: Path) -> Path:
    exe = work / "file_ops_ref"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", str(exe), str(REF_SRC)], check=True)
    return exe


def run_ref(exe: Path, d: Path, threads: int, seconds: float, case: str, files: int) -> dict:
    out = subprocess.run([str(exe), str(d), str(threads), str(seconds), case, str(files)],
                         capture_output=True, text=True, check=True)  # fmt: skip
    r = json.loads(out.stdout)
    n = r["stat"] if case == "stat" else r["create"]
    return {"ops": n, "rate": n / r["wall_s"], "cpu_us_per_op": r["cpu_s"] / n * 1e6}


def run_tilemark(root: Path, backend: str, threads: int, seconds: float, case: str,
                 files: int) -> dict:  # fmt: skip
    from tilemark import _engine
    from tilemark.files.run import file_plan, prepare_all
    from tilemark.files.spec import parse_file_workload

    if case == "stat":
        fs = {"name": "s", "path": str(root), "files": files, "size": "0"}
        st = {"name": "m", "ops": "stat", "threads": threads}
    else:
        fs = {"name": "s", "path": str(root), "files": 2 * files, "prealloc": 50, "size": "0"}
        st = {"name": "m", "sequence": "create,close,delete", "threads": threads}
    doc = {"name": "b", "duration": f"{seconds}s", "backend": backend, "fileset": [fs],
           "filestream": [st]}  # fmt: skip
    w = parse_file_workload(doc, "bench")
    plan = file_plan(w, prepare_all(w))
    cpu0, t0 = time.process_time(), time.monotonic()
    run = _engine.start_files(json.dumps(plan))
    while not run.wait(0.5):
        run.poll()
    res = json.loads(run.result())
    cpu = time.process_time() - cpu0
    wall = res["elapsed_ns"] / 1e9
    ops = res["streams"][0]["ops"]
    n = ops["stat"]["ops"] if case == "stat" else ops["create"]["ops"]
    if res["error"]:
        raise RuntimeError(res["error"])
    return {"ops": n, "rate": n / wall, "cpu_us_per_op": cpu / n * 1e6, "wall_s": wall,
            "outer_s": time.monotonic() - t0}  # fmt: skip


def mount_loop(kind: str, work: Path) -> Path | None:
    mkfs = shutil.which(f"mkfs.{kind}")
    if not mkfs or os.geteuid() != 0:
        return None
    image, mnt = work / f"{kind}.img", work / f"mnt-{kind}"
    mnt.mkdir(exist_ok=True)
    with open(image, "wb") as f:
        f.truncate(512 << 20)
    subprocess.run([mkfs, "-q", "-f" if kind == "xfs" else "-F", str(image)], check=True,
                   capture_output=True)  # fmt: skip
    subprocess.run(["mount", "-o", "loop", str(image), str(mnt)], check=True)
    return mnt


def pooled(rows: list[dict]) -> list[str]:
    """Per case and backend, every repetition's tilemark / reference ratio (rate, CPU per op)
    over all file systems and thread counts: median and quartiles, one line each. Under a
    shared machine's load one case's five ratios spread widely; the pool is the verdict."""
    lines = []
    for case in ("stat", "cycle"):
        for tool in ("tilemark-psync", "tilemark-uring"):
            rate, cpu = [], []
            for r in (r for r in rows if r["case"] == case):
                for t, f in zip(r["runs"][tool], r["runs"]["ref"], strict=True):
                    rate.append(t["rate"] / f["rate"])
                    cpu.append(t["cpu_us_per_op"] / f["cpu_us_per_op"])
            if not rate:
                continue
            q = [statistics.quantiles(v, n=4) if len(v) > 1 else [v[0]] * 3 for v in (rate, cpu)]
            lines.append(
                f"{case} {tool}: rate {q[0][1]:.2f}x (quartiles {q[0][0]:.2f}-{q[0][2]:.2f}), "
                f"CPU per op {q[1][1]:.2f}x ({q[1][0]:.2f}-{q[1][2]:.2f}), {len(rate)} repetitions"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=2.0)
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 4])
    ap.add_argument("--files", type=int, default=1000)
    ap.add_argument("--fs", nargs="+", default=["tmpfs", "ext4", "xfs"])
    ap.add_argument("--out", type=Path, default=tb.RESULTS_DIR)
    ap.add_argument("--pool", type=Path, nargs="+", help="print pooled ratios of result files")
    a = ap.parse_args(argv)
    if a.pool:
        for path in a.pool:
            print(path)
            for line in pooled(json.loads(path.read_text())["rows"]):
                print(f"  {line}")
        return 0
    work = Path(tempfile.mkdtemp(prefix="tm-file-ops-"))
    exe = build_ref(work)
    tools = ["tilemark-psync", "tilemark-uring", "ref"]
    rows = []
    mounts = []
    before = psi()
    try:
        for fs in a.fs:
            if fs == "tmpfs":
                base = Path(tempfile.mkdtemp(prefix="tm-file-ops-", dir="/dev/shm"))
                mounts.append((None, base))
            else:
                mnt = mount_loop(fs, work)
                if mnt is None:
                    print(f"{fs}: skipped (needs root and mkfs.{fs})", file=sys.stderr)
                    continue
                base = mnt
                mounts.append((mnt, mnt))
            for case in ("stat", "cycle"):
                for threads in a.threads:
                    tm_root = base / f"set-{case}-{threads}"
                    ref_dir = base / f"ref-{case}-{threads}"
                    ref_dir.mkdir()
                    # The reference's directory holds as many files as tilemark's set (for
                    # `cycle` the reference makes them itself, --files over its threads).
                    for i in range(a.files if case == "stat" else 0):
                        (ref_dir / f"f{i:08d}").touch()
                    results: dict[str, list[dict]] = {t: [] for t in tools}
                    pressure: list[tuple[float, float]] = []
                    for rep in range(a.reps):
                        order = tools[rep % 3 :] + tools[: rep % 3]
                        for tool in order:
                            if tool == "ref":
                                r = run_ref(exe, ref_dir, threads, a.seconds, case, a.files)
                            else:
                                backend = tool.split("-")[1]
                                r = run_tilemark(tm_root, backend, threads, a.seconds, case,
                                                 a.files)  # fmt: skip
                            results[tool].append(r)
                            pressure.append(psi_avg10())
                    cpu_p, io_p = [p[0] for p in pressure], [p[1] for p in pressure]
                    row = {"fs": fs, "case": case, "threads": threads, "runs": results,
                           "psi_cpu_some_avg10": [min(cpu_p), max(cpu_p)],
                           "psi_io_some_avg10": [min(io_p), max(io_p)]}  # fmt: skip
                    ref_rate = statistics.median(r["rate"] for r in results["ref"])
                    ref_cpu = statistics.median(r["cpu_us_per_op"] for r in results["ref"])
                    for tool in tools:
                        rate = statistics.median(r["rate"] for r in results[tool])
                        cpu = statistics.median(r["cpu_us_per_op"] for r in results[tool])
                        ratios = [t["rate"] / f["rate"] for t, f in
                                  zip(results[tool], results["ref"], strict=True)]  # fmt: skip
                        row[tool] = {"rate": rate, "cpu_us_per_op": cpu,
                                     "ratio_median": statistics.median(ratios),
                                     "ratio_min": min(ratios), "ratio_max": max(ratios),
                                     "cpu_ratio": cpu / ref_cpu, "ref_rate": ref_rate}  # fmt: skip
                    rows.append(row)
                    line = ", ".join(
                        f"{t} {row[t]['rate']:,.0f}/s ({row[t]['ratio_median']:.2f}x, "
                        f"{row[t]['cpu_us_per_op']:.1f} us CPU)"
                        for t in tools
                    )
                    print(f"{fs} {case} x{threads}: {line}; CPU/IO pressure "
                          f"{min(cpu_p):.0f}-{max(cpu_p):.0f}% / {min(io_p):.0f}-{max(io_p):.0f}%",
                          flush=True)  # fmt: skip
    finally:
        for mnt, base in mounts:
            if mnt is not None:
                subprocess.run(["umount", str(mnt)], check=False)
            else:
                shutil.rmtree(base, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    after = psi()
    machine = {"kernel": platform.release(), "cpus": os.cpu_count(), "psi_before": before,
               "psi_after": after, "python": platform.python_version()}  # fmt: skip
    doc = {"schema": SCHEMA, "command": " ".join(["bench/file_ops.py", *(argv or sys.argv[1:])]),
           "reps": a.reps, "seconds": a.seconds, "files": a.files, "rows": rows,
           "machine": machine}  # fmt: skip
    md = [f"# File and metadata operations: tilemark vs the same calls in C ({a.reps} reps, "
          f"{a.seconds:g} s each, {a.files:,} files)", "",
          f"Command: `{doc['command']}`. Kernel {machine['kernel']}, {machine['cpus']} CPUs. "
          f"Load before: CPU `{before['cpu']}`, IO `{before['io']}`; after: CPU "
          f"`{after['cpu']}`.", "",
          "Rates are medians over the repetitions (stat/s, or create+close+unlink cycles/s); "
          "ratio is the median of tilemark / reference per repetition (the lowest and highest "
          "repetition's in brackets); CPU is per operation (per cycle), user + system, every "
          "thread; pressure is `/proc/pressure` `some` avg10 read after every run of the case "
          "(lowest-highest).", "",
          "| fs | case | threads | reference | tilemark psync | ratio | CPU us (ref / psync) | "
          "tilemark uring | ratio | CPU us uring | CPU / IO pressure % |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        p, u, f = r["tilemark-psync"], r["tilemark-uring"], r["ref"]
        md.append(f"| {r['fs']} | {r['case']} | {r['threads']} | {f['rate']:,.0f} | "
                  f"{p['rate']:,.0f} | {p['ratio_median']:.2f} ({p['ratio_min']:.2f}-"
                  f"{p['ratio_max']:.2f}) | {f['cpu_us_per_op']:.1f} / {p['cpu_us_per_op']:.1f} | "
                  f"{u['rate']:,.0f} | {u['ratio_median']:.2f} ({u['ratio_min']:.2f}-"
                  f"{u['ratio_max']:.2f}) | {u['cpu_us_per_op']:.1f} | "
                  f"{r['psi_cpu_some_avg10'][0]:.0f}-{r['psi_cpu_some_avg10'][1]:.0f} / "
                  f"{r['psi_io_some_avg10'][0]:.0f}-{r['psi_io_some_avg10'][1]:.0f} |")  # fmt: skip
    md += ["", "Pooled over file systems and thread counts (every repetition's ratio):", ""]
    md += [f"- {line}" for line in pooled(rows)]
    json_path, md_path = tb.write_results(a.out, "file-ops", doc, "\n".join(md) + "\n")
    print(md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
