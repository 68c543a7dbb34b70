"""fio's file and directory engine examples run by fio and by `tilemark files run` (the
translation of tilemark.fio.fileengines), alternating, on one directory of the machine's file
system: operations done (each tool must handle every file once), rate, mean latency.

    .venv/bin/python bench/fio_fileengines.py /path/to/fio/examples --reps 3 --scale 10

Each example is run as fio ships it, with `directory=` added (each tool gets a fresh
directory of its own for every run, so creates always create) and filecreate's `nrfiles`
divided by --scale (31,250 x 16 jobs is half a million files). fio reports each job's
operations under `read` (the engines time their call as a read when rw is read, the default)
and its runtime; the rate is all jobs' operations over the longest job's runtime. tilemark's
is its operations over the run. An engine the installed fio lacks (Debian's fio 3.33 has no
dircreate, dirstat, dirdelete) is run by tilemark alone.

Results: bench/results/<date>-<time>-<host>-fio-fileengines.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import tmbench as tb

SCHEMA = "tilemark-bench-fio-fileengines/1"
ENGINES = {  # engine -> tilemark's operation
    "filecreate": "create",
    "filestat": "stat",
    "filedelete": "delete",
    "dircreate": "mkdir",
    "dirstat": "statdir",
    "dirdelete": "rmdir",
}


def job_text(examples: Path, engine: str, scale: int, directory: Path) -> str:
    text = (examples / f"{engine}-ioengine.fio").read_text()
    if engine == "filecreate":
        text = re.sub(r"nrfiles=(\d+)", lambda m: f"nrfiles={int(m.group(1)) // scale}", text)
    return text.replace("[global]", f"[global]\ndirectory={directory}", 1)


def fio_has(fio: str, engine: str, work: Path) -> bool:
    """Whether this fio has the engine (--parse-only does not load engines: a one-file job)."""
    d = work / f"probe-{engine}"
    d.mkdir()
    job = work / "probe.fio"
    job.write_text(f"[p]\nioengine={engine}\nfilesize=4k\nnrfiles=1\ndirectory={d}\n")
    p = subprocess.run([fio, "--output-format=json", str(job)], capture_output=True, text=True)
    shutil.rmtree(d, ignore_errors=True)
    return "not loadable" not in p.stderr


def run_fio(fio: str, job: Path) -> dict[str, Any]:
    p = subprocess.run([fio, "--output-format=json", str(job)], capture_output=True, text=True)
    if p.returncode != 0:
        raise tb.SetupError(f"fio failed on {job.name}: {p.stderr.strip()[:300]}")
    jobs = json.loads(p.stdout[p.stdout.index("{") :])["jobs"]
    ops = sum(j["read"]["total_ios"] + j["write"]["total_ios"] for j in jobs)
    seconds = max(j["job_runtime"] for j in jobs) / 1000
    lat = [(j[d]["clat_ns"]["mean"], j[d]["total_ios"]) for j in jobs for d in ("read", "write")]
    mean_us = sum(m * n for m, n in lat) / max(ops, 1) / 1000
    return {"ops": ops, "seconds": seconds, "rate": ops / seconds if seconds else None,
            "mean_us": mean_us, "errors": sum(j["error"] != 0 for j in jobs)}  # fmt: skip


def run_tilemark(tilemark: str, job: Path, work: Path, op: str) -> dict[str, Any]:
    out = work / "tm.json"
    out.unlink(missing_ok=True)
    cmd = [tilemark, "files", "run", str(job), "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise tb.SetupError(f"tilemark failed on {job.name}: {p.stderr.strip()[:300]}")
    r = json.loads(out.read_text())
    rows = [next(o for o in s["ops"] if o["op"] == op) for s in r["streams"]]
    ops = sum(o["ops"] for o in rows)
    mean_us = sum((o["mean_us"] or 0) * o["ops"] for o in rows) / max(ops, 1)
    return {"ops": ops, "seconds": r["seconds"], "rate": ops / r["seconds"],
            "mean_us": mean_us, "errors": sum(sum(o["errors"].values()) for o in rows)}  # fmt: skip


def median(runs: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in runs if r[key] is not None]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("examples", type=Path, help="fio's examples/ directory")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--scale", type=int, default=10, help="divide filecreate's nrfiles by this")
    ap.add_argument("--fio", default=tb.DEFAULT_FIO)
    ap.add_argument("--tilemark", default=str(tb.REPO / ".venv" / "bin" / "tilemark"))
    ap.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()))
    ap.add_argument("--out", type=Path, default=tb.RESULTS_DIR)
    a = ap.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="tm-fio-fileengines-", dir=a.work))
    before = {k: tb.psi_some(k) for k in ("cpu", "io")}
    rows = []
    try:
        for engine, op in ENGINES.items():
            tools = ["fio", "tilemark"] if fio_has(a.fio, engine, work) else ["tilemark"]
            runs: dict[str, list[dict[str, Any]]] = {t: [] for t in tools}
            for rep in range(a.reps):
                for tool in tools[rep % 2 :] + tools[: rep % 2]:
                    d = work / f"{engine}-{tool}-{rep}"
                    d.mkdir()
                    job = work / f"{engine}-ioengine.fio"
                    job.write_text(job_text(a.examples, engine, a.scale, d))
                    r = run_fio(a.fio, job) if tool == "fio" else run_tilemark(
                        a.tilemark, job, work, op)  # fmt: skip
                    runs[tool].append(r)
                    shutil.rmtree(d, ignore_errors=True)
            row: dict[str, Any] = {"engine": engine, "op": op, "runs": runs}
            for tool in tools:
                row[tool] = {k: median(runs[tool], k) for k in ("ops", "rate", "mean_us")}
                row[tool]["errors"] = sum(r["errors"] for r in runs[tool])
            rows.append(row)
            print(engine, {t: row[t] for t in tools}, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    after = {k: tb.psi_some(k) for k in ("cpu", "io")}
    fio_version = tb.run_text([a.fio, "--version"])
    machine = {"kernel": platform.release(), "cpus": os.cpu_count(), "fio": fio_version,
               "psi_before": before, "psi_after": after, "work": str(a.work)}  # fmt: skip
    command = " ".join(["bench/fio_fileengines.py", *(argv or sys.argv[1:])])
    doc = {"schema": SCHEMA, "command": command, "reps": a.reps, "scale": a.scale,
           "rows": rows, "machine": machine}  # fmt: skip
    md = [f"# fio's file and directory engine examples: fio and tilemark ({a.reps} reps)", "",
          f"Command: `{command}`. {fio_version}, kernel {machine['kernel']}, {machine['cpus']} "
          f"CPUs, directory under {a.work}. CPU pressure (some, avg60) before "
          f"{before['cpu'].get('avg60')}%, after {after['cpu'].get('avg60')}%; IO "
          f"{before['io'].get('avg60')}% / {after['io'].get('avg60')}%. filecreate's nrfiles "
          f"divided by {a.scale}.", "",
          "Medians over the repetitions: operations done (every file once is the expected "
          "count), operations per second, mean latency of the operation.", "",
          "| engine | op | fio ops | fio ops/s | fio mean us | tilemark ops | tilemark ops/s "
          "| tilemark mean us | tilemark / fio rate |",
          "|---|---|---|---|---|---|---|---|---|"]  # fmt: skip

    def fmt(v: float | None, spec: str = ",.0f") -> str:
        return "-" if v is None else format(v, spec)

    for r in rows:
        f, t = r.get("fio", {}), r["tilemark"]
        ratio = tb.ratio(t["rate"], f.get("rate"))
        md.append(f"| {r['engine']} | {r['op']} | {fmt(f.get('ops'))} | {fmt(f.get('rate'))} | "
                  f"{fmt(f.get('mean_us'), ',.1f')} | {fmt(t['ops'])} | {fmt(t['rate'])} | "
                  f"{fmt(t['mean_us'], ',.1f')} | {fmt(ratio, '.2f')} |")  # fmt: skip
    json_path, md_path = tb.write_results(a.out, "fio-fileengines", doc, "\n".join(md) + "\n")
    print(md_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
