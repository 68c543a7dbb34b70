"""Many hosts, one run (docs/cluster.md), end to end on Dask workers on this machine: a
workload and a scale study across `local:3` with a file per worker, the hosts' start instants,
a worker killed mid-run, a TLS cluster that accepts only certified clients, and hosts running
another tilemark refused. Every address is 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")
pytest.importorskip("distributed", reason="cluster runs need distributed (make build)")

from tilemark.hist import Histogram  # noqa: E402

OPS = ("read", "write")
TILEMARK = str(Path(sys.executable).with_name("tilemark"))


def tilemark(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [TILEMARK, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def hist_sum(hists: list) -> dict:
    return Histogram.merged(h for h in hists if h).to_json()


def assert_merged_is_sum(run_dir: Path) -> dict:
    """The run's result and intervals are the hosts' added: histograms bucket by bucket."""
    doc = json.loads((run_dir / "run.json").read_text())
    hosts = doc["hosts"]
    for stream in doc["result"]["streams"]:
        for op in OPS:
            parts = [
                s[op]["service"]
                for h in hosts
                for s in h["result"]["streams"]
                if s["stream"] == stream["stream"] and s.get(op)
            ]
            merged = (stream.get(op) or {}).get("service")
            assert (merged or {"n": 0})["n"] == sum(p["n"] for p in parts if p)
            if merged:
                assert merged["b"] == hist_sum(parts)["b"]
    cols = ["interval", "stream", "op", "ops", "service_hist"]
    merged_rows = pq.read_table(run_dir / "intervals.parquet", columns=cols).to_pylist()
    per_host: dict[tuple, list] = {}
    for h in hosts:
        rows = pq.read_table(run_dir / h["dir"] / "intervals.parquet", columns=cols).to_pylist()
        assert rows, f"{h['name']} has intervals of its own"
        for r in rows:
            per_host.setdefault((r["interval"], r["stream"], r["op"]), []).append(r)
    assert merged_rows
    for r in merged_rows:
        parts = per_host[(r["interval"], r["stream"], r["op"])]
        assert r["ops"] == sum(p["ops"] for p in parts)
        if r["service_hist"]:
            want = hist_sum([json.loads(p["service_hist"]) for p in parts if p["service_hist"]])
            assert json.loads(r["service_hist"])["b"] == want["b"]
    return doc


def test_a_workload_and_a_scale_study_across_three_workers(tmp_path: Path) -> None:
    results = tmp_path / "results"
    target = str(tmp_path / "tm-{worker}.dat")
    run = tilemark(
        "run", "--cluster", "local:3", "--target", target, "--size", "8m", "--rw", "randrw",
        "--bs", "4k", "--qd", "2", "--duration", "1.5", "--interval", "0.25s",
        "--backend", "psync", "--results", str(results), "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    hosts = out["summary"]["hosts"]
    assert len(hosts) == 3
    assert {h["status"] for h in hosts} == {"ok"}
    paths = sorted(p for h in hosts for p in h["targets"])
    assert paths == [str(tmp_path / f"tm-{w}.dat") for w in range(3)]
    assert all(Path(p).stat().st_size > 8 << 20 for p in paths), "each worker's own file"
    assert all(h["iops"] > 0 and h["errors"] == 0 for h in hosts)
    total = out["summary"]["total"]["iops"]
    assert sum(h["iops"] for h in hosts) == pytest.approx(total, rel=0.1)
    # The engines recorded when they really started: within 5 ms of each other.
    starts = [h["started_at_ns"] for h in hosts]
    assert max(starts) - min(starts) <= 5_000_000, starts
    assert all(h["start_late_ms"] >= 0 for h in hosts)
    assert_merged_is_sum(Path(out["run_dir"]))
    assert "per host" in run.stderr

    scale = tilemark(
        "scale", "--cluster", "local:3", "--target", target, "--capacity", "64m",
        "--tiles", "1,3", "--duration", "1", "--warmup", "0", "--interval", "0.25s",
        "--backend", "null", "--results", str(results), "--no-report", "--json",
    )  # fmt: skip
    assert scale.returncode == 0, scale.stderr
    study = json.loads(scale.stdout)
    by_tiles = {s["tiles"]: s for s in study["steps"]}
    assert [h["name"] for h in by_tiles[1]["hosts"]] == [hosts[0]["name"]]
    three = by_tiles[3]["hosts"]
    assert len(three) == 3, "round robin: one tile per worker"
    assert len({len(h["streams"]) for h in three}) == 1
    run_dir = results / by_tiles[3]["run_id"]
    doc = assert_merged_is_sum(run_dir)
    streams = {s["name"]: s for s in doc["plan"]["streams"]}
    for h in doc["hosts"]:
        tiles = {streams[n]["name"].split(".")[0] for n in h["streams"]}
        assert len(tiles) == 1, f"{h['name']} runs one tile: {tiles}"


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"resource_tracker" not in cmdline:
            out.append(int(entry))
    return out


def test_a_worker_killed_mid_run_is_lost_within_two_intervals(tmp_path: Path) -> None:
    results = tmp_path / "results"
    interval = 0.5
    proc = subprocess.Popen(
        [
            TILEMARK, "run", "--cluster", "local:3",
            "--target", str(tmp_path / "tm-{worker}.dat"), "--size", "4m", "--bs", "4k",
            "--rw", "randread", "--qd", "1", "--rate", "500", "--duration", "20",
            "--interval", f"{interval}s", "--backend", "null", "--results", str(results),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        seen = ""
        while "measure]" not in seen:  # the first interval line: every host is running
            line = proc.stderr.readline()
            assert line, f"the run ended early: {seen}"
            seen += line
        time.sleep(2 * interval)
        workers = _children(proc.pid)
        assert len(workers) == 3, workers
        victim = workers[1]
        killed_at = time.time_ns()
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, err
    doc = json.loads(out)
    assert not doc["complete"]
    summary = doc["summary"]
    lost = [h for h in summary["hosts"] if h["status"] == "lost"]
    assert [h["pid"] for h in lost] == [victim]
    assert summary["cluster"]["lost"] == [lost[0]["name"]]
    assert f"host {lost[0]['name']} lost" in err
    # Noticed within 2 intervals of silence (plus the poll and a loaded machine's slack).
    detected_s = (lost[0]["lost_at_ns"] - killed_at) / 1e9
    assert detected_s <= 2 * interval + 1.0, detected_s
    run_json = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert run_json["status"] == "incomplete"
    # Everything received is kept: the lost host's intervals up to the kill, the others' to
    # the stop.
    for h in summary["hosts"]:
        rows = pq.read_table(Path(doc["run_dir"]) / h["dir"] / "intervals.parquet").num_rows
        assert rows >= 2, h["name"]
    assert summary["total"]["iops"] > 0
