"""How fast `tilemark trace import` reads each text format, and that its memory stays bounded.

For each format (blkparse, fio iolog v3, MSR Cambridge, Alibaba, Tencent CBS) and each size
(default 100 MB and 1000 MB of text) a trace is generated once into --dir with the renderers
the tests use (tests/trace_render.py: each format as its publisher documents it; blkparse with
Q, G, I, D, C, plug/unplug and merge lines like a real capture). Then every (format, size) is
imported --repeat times, in a fresh process each (`--one`, so peak RSS is the import's alone),
the order shuffled every repetition so that drift and other load land on all of them. Each
run records the load average and CPU/IO pressure (PSI) before it: the machine is shared.

Reported per (format, size): median MB/s of text, median requests/s, median and max peak RSS.
Bounded memory shows as the same peak RSS for 100 MB and 1000 MB.

    .venv/bin/python bench/trace_import.py                 # 100 MB and 1 GB, 3 repetitions
    .venv/bin/python bench/trace_import.py --sizes 50 --repeat 1 --formats msr

Results: bench/results/<date>-<time>-<host>-trace-import.json and .md. The generated files stay in
--dir (default bench/work/trace-import) for the next run; delete it to free the space.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import random
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import tmbench as tb

HERE = tb.BENCH
ROOT = tb.REPO
SCHEMA = "tilemark-bench-trace-import/1"
FORMATS = ("blkparse", "iolog", "msr", "alibaba", "tencent")
RENDER_AS = {"iolog": "iolog3"}
MB = 1_000_000


# -- generated traces --------------------------------------------------------------------------
DEVICES = {"blkparse": "8:16", "msr": "hm_1", "alibaba": "419", "tencent": "1283",
           "iolog": "/dev/sdb"}  # fmt: skip


def workload(seed: int, device: str) -> Iterator[dict[str, Any]]:
    """An endless, plausible mix: 4 KiB random reads, 64-128 KiB sequential writes, syncs."""
    rng = random.Random(seed)
    t, seq = 0, 0
    procs = [(4162, "postgres"), (4170, "postgres"), (212, "jbd2/sdb-8"), (880, "rocksdb:low")]
    while True:
        t += int(rng.expovariate(1 / 40_000)) + 1  # ~25k IOPS
        r = rng.random()
        if r < 0.55:
            op, size, offset = "read", 4096, rng.randrange(1 << 26) * 4096
        elif r < 0.97:
            op, size = "write", rng.choice((65536, 131072))
            offset, seq = seq, seq + size
        else:
            op, size, offset = "flush", 0, 0
        latency = int(rng.lognormvariate(11.5, 0.7))
        pid, comm = rng.choice(procs)
        yield {
            "issue_ns": t, "complete_ns": t + latency, "latency_ns": latency, "op": op,
            "offset": offset, "size": size, "sync": op != "read", "fua": False,
            "preflush": op == "flush", "meta": False, "pid": pid, "comm": comm,
            "device": device,
        }  # fmt: skip


class _Limited:
    """Stops the workload once the file is `limit` bytes long."""

    def __init__(self, rows: Iterator[dict[str, Any]], out, limit: int, fmt: str):
        self.rows, self.out, self.limit, self.fmt = rows, out, limit, fmt

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for i, row in enumerate(self.rows):
            if self.fmt in ("msr", "alibaba", "tencent") and row["op"] == "flush":
                row["op"], row["size"], row["offset"] = "write", 4096, 0
            yield row
            if i % 4096 == 0 and self.out.tell() >= self.limit:
                return


def _render_module() -> Any:
    """tests/trace_render.py, the renderers the tests use (tests/ is not a package)."""
    spec = importlib.util.spec_from_file_location(
        "trace_render", ROOT / "tests" / "trace_render.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def generate(fmt: str, size_mb: int, directory: Path) -> Path:
    """The trace file of `fmt`, about `size_mb` MB of text (reused when already there)."""
    render = _render_module().render
    path = directory / f"{fmt}-{size_mb}MB.txt"
    if path.exists():
        return path
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".partial")
    started = time.perf_counter()
    with open(tmp, "w", buffering=1 << 20) as out:
        rows = _Limited(workload(size_mb, DEVICES[fmt]), out, size_mb * MB, fmt)
        render(rows, RENDER_AS.get(fmt, fmt), out)
    tmp.rename(path)
    print(f"generated {path} ({path.stat().st_size / MB:,.0f} MB) in "
          f"{time.perf_counter() - started:.0f} s", file=sys.stderr)  # fmt: skip
    return path


# -- one import, in its own process -------------------------------------------------------------
def one(fmt: str, src: str, out: str) -> None:
    """Import and print the result with this process's peak RSS (run by the driver)."""
    from tilemark.trace.importer import import_trace

    result = import_trace(src, fmt, out, force=True)
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "rows": result.rows, "bytes_read": result.bytes_read, "seconds": result.seconds,
        "mb_per_s": result.mb_per_s, "rows_per_s": result.rows_per_s,
        "peak_rss_mb": peak_kb / 1024, "skipped": {s.reason: s.count for s in result.skipped},
    }))  # fmt: skip


def machine_notes() -> dict[str, Any]:
    """The machine notes every result carries, with pyarrow's version and the commit."""
    import pyarrow

    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    tilemark = str(ROOT / ".venv" / "bin" / "tilemark")
    return tb.machine_notes(tb.Settings(tilemark, tb.DEFAULT_FIO)) | {
        "host": socket.gethostname(),
        "pyarrow": pyarrow.__version__,
        "commit": commit,
    }


def run(args: argparse.Namespace) -> dict[str, Any]:
    directory = Path(args.dir)
    cases = [(f, s) for f in args.formats for s in args.sizes]
    files = {(f, s): generate(f, s, directory) for f, s in cases}
    runs: list[dict[str, Any]] = []
    rng = random.Random(1)
    for rep in range(args.repeat):
        order = cases[:]
        rng.shuffle(order)
        for fmt, size in order:
            src = files[(fmt, size)]
            out = directory / f"{fmt}-{size}MB.parquet"
            os.sync()
            time.sleep(1)
            load = tb.load_now()
            cmd = [sys.executable, __file__, "--one", fmt, str(src), str(out)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"import of {src} failed: {done.stderr.strip()}")
            result = json.loads(done.stdout)
            result.update(
                format=fmt,
                size_mb=size,
                rep=rep,
                load_before=load,
                file_mb=src.stat().st_size / MB,
                trace_mb=out.stat().st_size / MB,
            )
            runs.append(result)
            print(f"rep {rep} {fmt:9s} {size:5d} MB: {result['mb_per_s']:7.1f} MB/s "
                  f"{result['rows_per_s']:>11,.0f} rows/s  RSS {result['peak_rss_mb']:6.0f} MB "
                  f"(cpu psi {load['cpu_some_avg10']})", file=sys.stderr)  # fmt: skip
            out.unlink()
    return {"schema": SCHEMA, "machine": machine_notes(), "args": vars(args), "runs": runs,
            "summary": summarize(runs)}  # fmt: skip


def summarize(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    table = []
    for fmt in dict.fromkeys(r["format"] for r in runs):
        for size in sorted({r["size_mb"] for r in runs if r["format"] == fmt}):
            mine = [r for r in runs if r["format"] == fmt and r["size_mb"] == size]
            table.append({
                "format": fmt, "size_mb": size, "runs": len(mine),
                "file_mb": mine[0]["file_mb"], "rows": mine[0]["rows"],
                "trace_mb": mine[0]["trace_mb"],
                "mb_per_s": statistics.median(r["mb_per_s"] for r in mine),
                "mb_per_s_min": min(r["mb_per_s"] for r in mine),
                "mb_per_s_max": max(r["mb_per_s"] for r in mine),
                "rows_per_s": statistics.median(r["rows_per_s"] for r in mine),
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in mine),
                "peak_rss_mb_max": max(r["peak_rss_mb"] for r in mine),
                "cpu_psi_avg10_median": statistics.median(
                    r["load_before"]["cpu_some_avg10"] or 0 for r in mine),
            })  # fmt: skip
    return table


def markdown(doc: dict[str, Any]) -> str:
    m = doc["machine"]
    lines = [
        "# trace import: rate and memory",
        "",
        f"- {m['date']} on {m['host']}: {m['cpu_model']}, {m['cpus']} CPUs, Linux {m['kernel']},"
        f" Python {m['python']}, pyarrow {m['pyarrow']}, tilemark {m['commit']}",
        "- command: `.venv/bin/python bench/trace_import.py "
        + " ".join(f"--{k} {','.join(map(str, v)) if isinstance(v, list) else v}"
                   for k, v in doc["args"].items() if k not in ("one", "dir", "out")) + "`",
        "- each import in a fresh process; order shuffled per repetition; medians "
        "(min..max for MB/s); peak RSS = the import process's ru_maxrss",
        "",
        "| format | text MB | requests | trace MB | MB/s (min..max) | requests/s | peak RSS MB "
        "(max) | CPU PSI avg10 before |",
        "|---|---:|---:|---:|---|---:|---|---:|",
    ]  # fmt: skip
    for r in doc["summary"]:
        lines.append(
            f"| {r['format']} | {r['file_mb']:,.0f} | {r['rows']:,} | {r['trace_mb']:,.1f} | "
            f"{r['mb_per_s']:,.1f} ({r['mb_per_s_min']:,.1f}..{r['mb_per_s_max']:,.1f}) | "
            f"{r['rows_per_s']:,.0f} | {r['peak_rss_mb']:,.0f} ({r['peak_rss_mb_max']:,.0f}) | "
            f"{r['cpu_psi_avg10_median']:.1f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--one", nargs=3, metavar=("FORMAT", "SRC", "OUT"), help=argparse.SUPPRESS)
    p.add_argument("--sizes", default="100,1000", help="MB of text per trace (comma-separated)")
    p.add_argument("--formats", default=",".join(FORMATS))
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--dir", default=str(HERE / "work" / "trace-import"))
    p.add_argument("--out", default=str(HERE / "results"))
    args = p.parse_args()
    if args.one:
        one(*args.one)
        return
    args.sizes = [int(s) for s in args.sizes.split(",")]
    args.formats = args.formats.split(",")
    doc = run(args)
    json_path, md_path = tb.write_results(Path(args.out), "trace-import", doc, markdown(doc))
    print(markdown(doc))
    print(f"results: {json_path}, {md_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
