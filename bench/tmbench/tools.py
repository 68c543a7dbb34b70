"""Running the two tools, tilemark and fio, and reading what they report: where they are, that
they work, the target's tilemark header, and the metrics of one run of each."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tmbench.common import REPO, SCRATCH, SetupError, rel
from tmbench.proc import ChildRun

MARKER = b"TILEMARK-TARGET\n"
HEADER_SIZE = 4096
OPS = ("read", "write")
RAW_STREAMS = 4  # per-stream summaries kept in the results JSON for many-stream cases


@dataclass
class Settings:
    """How both tools run: the binaries, the target and its region, and the run's times (a
    script that only wants machine_notes() names the binaries alone)."""

    tilemark: str
    fio: str
    size: int = 0
    duration: float = 0.0
    warmup: float = 0.0
    reps: int = 1
    region_offset: int = HEADER_SIZE
    region_length: int = 0
    target: str = rel(SCRATCH)  # what both tools are pointed at: the scratch file or a device
    device: bool = False  # target is a block device: data area at 0, tilemark gets --size
    pin: int | None = None  # --pin: both tools run on this CPU (taskset)


def find_tilemark(explicit: str | None) -> str:
    """The tilemark CLI: `explicit`, else next to this Python, else the repo's .venv."""
    candidates = (
        [explicit]
        if explicit
        else [
            str(Path(sys.executable).parent / "tilemark"),
            str(REPO / ".venv" / "bin" / "tilemark"),
        ]
    )
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise SetupError(f"tilemark CLI not found (tried {', '.join(candidates)}); run `make build`")


def check_fio(fio: str) -> None:
    """SetupError unless fio is an executable file or on PATH."""
    if not (Path(fio).is_file() and os.access(fio, os.X_OK)) and not shutil.which(fio):
        raise SetupError(
            f"fio not found at {fio}; install Debian's fio (`make system-deps` or "
            f"`apt-get install fio`) or pass --fio PATH"
        )


def check_tilemark(s: Settings) -> None:
    """SetupError unless this Python imports tilemark (for its histograms) and the CLI runs."""
    try:
        import tilemark.hist  # noqa: F401  (merging many streams' histograms needs it)
    except ImportError:
        raise SetupError(
            "this Python cannot import tilemark; run the script with the virtualenv's Python "
            "(.venv/bin/python bench/vs_fio.py, as make bench does)"
        ) from None
    probe = subprocess.run([s.tilemark, "run", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        tail = " | ".join((probe.stderr or probe.stdout).strip().splitlines()[-2:])
        raise SetupError(f"`{s.tilemark} run --help` fails, the CLI is not usable: {tail}")


def read_header(path: Path) -> dict[str, Any] | None:
    """The JSON of a tilemark target's marker header, None when path has none."""
    try:
        with open(path, "rb") as f:
            raw = f.read(HEADER_SIZE)
    except OSError:
        return None
    if not raw.startswith(MARKER):
        return None
    try:
        return json.loads(raw[len(MARKER) :].split(b"\0", 1)[0])
    except ValueError:
        return None


def _merged_us(streams: list[dict], op: str, kind: str) -> dict[str, float | None]:
    """p50, p99 and mean (us) of one latency histogram merged over every stream."""
    from tilemark.hist import Histogram

    hist = Histogram.merged((st.get(op) or {}).get(kind) for st in streams)
    to_us = lambda v: None if v is None else v / 1000.0  # noqa: E731
    return {
        "p50": to_us(hist.percentile(50.0)),
        "p99": to_us(hist.percentile(99.0)),
        "mean": to_us(hist.mean()),
    }


def parse_tilemark(child: ChildRun) -> dict[str, Any]:
    """Metrics from tilemark's --json stdout and its run.json (engine result, plan, window)."""
    doc = json.loads(child.stdout)
    summary = doc["summary"]
    run_json = Path(doc.get("run_dir") or "") / "run.json"
    if not run_json.is_absolute():
        run_json = REPO / run_json
    run = json.loads(run_json.read_text())
    result, plan = run["result"], run["plan"]
    streams = result["streams"]
    ops = {k: sum(int((st.get(k) or {}).get("ops", 0)) for st in streams) for k in OPS}
    lat_op = "read" if ops["read"] else "write"  # the mixed case compares reads
    service = _merged_us(streams, lat_op, "service")
    metrics = {
        "iops": float(summary["total"]["iops"]),
        "mbps": float(summary["total"]["mbps"]),
        "ios": ops["read"] + ops["write"],
        "duration_s": float(summary["duration_s"]),
        "p50_us": service["p50"],
        "p99_us": service["p99"],
        "mean_us": service["mean"],
        # tilemark's service clock starts before the submitting io_uring_enter, like fio's lat.
        "lat_mean_us": service["mean"],
        "streams": len(streams),
    }
    if ops["read"] and ops["write"]:
        write = _merged_us(streams, "write", "service")
        metrics["write_p50_us"], metrics["write_p99_us"] = write["p50"], write["p99"]
    if any((st.get(lat_op) or {}).get("response") for st in streams):
        response = _merged_us(streams, lat_op, "response")
        metrics["response_p50_us"] = response["p50"]
        metrics["response_p99_us"] = response["p99"]
        metrics["lag_max_us"] = max(int(st.get("lag_max_ns", 0)) for st in streams) / 1000.0
        metrics["ios_issued_late"] = sum(int(st.get("ios_issued_late", 0)) for st in streams)
    t0 = int(result["started_at_ns"]) / 1e9
    window = (t0 + int(result["measure_start_ns"]) / 1e9, t0 + int(result["measure_end_ns"]) / 1e9)
    pstream = plan["streams"][0]
    # Plan 2 (regions per stream), else plan 1 (one target, offset and length per stream).
    region = (pstream.get("regions") or [pstream])[0]
    target = plan["targets"][int(region.get("target", 0))]
    plan_region = {
        "offset": int(target["offset"]) + int(region.get("offset", 0)),
        "length": int(region["length"]),
        "align": pstream.get("align"),
        "direct": target.get("direct"),
        "seed": pstream.get("seed"),
    }
    if len(summary["streams"]) > RAW_STREAMS:  # keep the results file readable
        kept = summary["streams"][:RAW_STREAMS]
        summary = dict(summary, streams=kept, streams_omitted=len(summary["streams"]) - len(kept))
    return {
        "metrics": metrics,
        "window": window,
        "raw": dict(doc, summary=summary),
        "plan_region": plan_region,
    }


def _fio_clat_us(op: dict, pct: str) -> float | None:
    value = (op.get("clat_ns", {}).get("percentile") or {}).get(pct)
    return None if value is None else value / 1000.0


def parse_fio(child: ChildRun) -> dict[str, Any]:
    """Metrics from fio's --output-format=json stdout (one job, group reporting)."""
    # fio may print warnings before the JSON document on stdout.
    text = child.stdout
    doc = json.loads(text[text.index("{") :])
    job = doc["jobs"][0]
    read, write = job["read"], job["write"]
    ops = int(read["total_ios"]) + int(write["total_ios"])
    lat_op = read if read["total_ios"] else write
    metrics = {
        "iops": float(read["iops"]) + float(write["iops"]),
        "mbps": (float(read["bw_bytes"]) + float(write["bw_bytes"])) / 1e6,
        "ios": ops,
        "duration_s": int(job["job_runtime"]) / 1000.0,
        "p50_us": _fio_clat_us(lat_op, "50.000000"),
        "p99_us": _fio_clat_us(lat_op, "99.000000"),
        "mean_us": lat_op["clat_ns"]["mean"] / 1000.0,
        # fio's io_uring engine stamps issue_time after io_uring_enter returns, so clat leaves
        # out the submitting system call (slat); lat = slat + clat is the like-for-like mean.
        "lat_mean_us": lat_op["lat_ns"]["mean"] / 1000.0,
        "slat_mean_us": lat_op["slat_ns"]["mean"] / 1000.0,
    }
    if read["total_ios"] and write["total_ios"]:
        metrics["write_p50_us"] = _fio_clat_us(write, "50.000000")
        metrics["write_p99_us"] = _fio_clat_us(write, "99.000000")
    # timestamp_ms is taken when the report is written, right after the job ended.
    end = int(doc["timestamp_ms"]) / 1000.0
    window = (end - int(job["job_runtime"]) / 1000.0, end)
    raw = {
        "fio version": doc.get("fio version"),
        "timestamp_ms": doc.get("timestamp_ms"),
        "job": {k: v for k, v in job.items() if k not in ("trim", "sync", "job options")},
        "disk_util": doc.get("disk_util"),
    }
    return {"metrics": metrics, "window": window, "raw": raw, "plan_region": None}
