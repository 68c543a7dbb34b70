"""Real `tilemark run` processes whose results are cut short: SIGKILL, a results filesystem
that fills up or is too small, a read-only results directory. What was measured stays
readable, the run's status says what happened, and nothing is left half written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from tilemark.report.telemetry import read_rows
from tilemark.store.rundoc import inspect_run, read_intervals
from tilemark.telemetry import sampler as tm

from .rigs import need_root, remount_read_only, small_filesystem

pytestmark = [pytest.mark.root, pytest.mark.cost(25)]


def tilemark() -> str:
    return str(Path(sys.executable).with_name("tilemark"))


def cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tilemark(), *args], capture_output=True, text=True, timeout=timeout, env=_env()
    )


def _env() -> dict[str, str]:
    return {**os.environ, "TILEMARK_COLUMNS": "80"}


def start_run(target: Path, results: Path, *extra: str) -> subprocess.Popen:
    cmd = [
        tilemark(), "run", "--target", str(target), "--size", "16m", "--backend", "null",
        "--rw", "randread", "--results", str(results), *extra,
    ]  # fmt: skip
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env()
    )


def wait_for_run_dir(results: Path, proc: subprocess.Popen, timeout: float = 30) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dirs = [d for d in results.glob("2*") if (d / "run.json").is_file()]
        if dirs:
            return dirs[0]
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    raise AssertionError("the run did not start")


def started_at(run_dir: Path) -> float:
    doc = json.loads((run_dir / "run.json").read_text())
    return datetime.fromisoformat(doc["started_at"]).timestamp()


def leftovers(root: Path) -> list[str]:
    """Temporary files anywhere under root."""
    return [str(p) for p in root.rglob("*") if p.name.endswith(".tmp")]


# -----------------------------------------------------------------------------------------------
# SIGKILL


@pytest.mark.serial
def test_sigkill_loses_at_most_one_interval_and_the_run_shows_killed(tmp_path):
    results = tmp_path / "results"
    interval_s = 0.5
    proc = start_run(tmp_path / "t.dat", results, "--duration", "60", "--interval", "0.5")
    run_dir = wait_for_run_dir(results, proc)
    # A run still in progress is `running`, and cannot be deleted.
    time.sleep(1.5)
    listed = json.loads(cli("runs", "--results", str(results), "--json").stdout)
    assert [r["status"] for r in listed] == ["running"]
    refused = cli("runs", "rm", "--results", str(results), run_dir.name)
    assert refused.returncode == 2 and "still running" in refused.stderr
    kept_prune = cli("runs", "prune", "--older-than", "0s", "--results", str(results))
    assert kept_prune.returncode == 0 and "still running" in kept_prune.stdout

    time.sleep(1.5)  # a few more intervals kept (the listing above took a second or two)
    killed_at = time.time()
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL

    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "running"  # as the killed process left it: readers never rewrite
    assert doc["process"]["pid"] == proc.pid
    assert doc["process"]["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    table = read_intervals(run_dir)
    intervals = sorted(set(table.column("interval").to_pylist()))
    assert intervals == list(range(len(intervals))), "kept intervals have no holes"
    kept_s = max(table.column("end_ns").to_pylist()) / 1e9
    run_s = killed_at - started_at(run_dir)
    # The interval in progress is lost; a finished one is on disk within the 0.2 s poll.
    assert run_s - kept_s < interval_s + 1.0, (run_s, kept_s)
    assert (run_dir / "intervals.arrows").is_file() and not (run_dir / "intervals.parquet").exists()
    # Telemetry is logged the same way: the host rows of the kept intervals are on disk.
    assert (run_dir / "host.arrows").is_file() and not (run_dir / "host.parquet").exists()
    host_rows = read_rows(run_dir, tm.HOST_FILE, tm.HOST_LOG)
    assert len(host_rows) >= len(intervals) - 1
    assert {r["interval"] for r in host_rows} <= set(intervals)

    state = inspect_run(run_dir)
    assert state.status == "killed" and f"process {proc.pid}" in state.problem
    (row,) = json.loads(cli("runs", "--results", str(results), "--json").stdout)
    assert row["status"] == "killed" and f"{len(intervals)} intervals kept" in row["problem"]
    assert row["duration_s"] == pytest.approx(kept_s, abs=1.0) and row["total_iops"] > 0
    shown = cli("runs", "--results", str(results))
    assert "killed" in shown.stdout and max(map(len, shown.stdout.splitlines()[:4])) <= 80

    report = cli("report", run_dir.name, "--results", str(results), "-o", str(tmp_path / "k.html"))
    assert report.returncode == 0, report.stderr
    assert "is killed" in report.stderr and "process" in report.stderr
    assert f"{len(intervals)} intervals" in (tmp_path / "k.html").read_text()
    assert "Host CPU and pressure" in (tmp_path / "k.html").read_text()
    export = cli("export", run_dir.name, "--results", str(results), "--csv", str(tmp_path / "c"))
    assert export.returncode == 0, export.stderr
    csv_rows = (tmp_path / "c" / "intervals.csv").read_text().splitlines()
    assert len(csv_rows) - 1 == table.num_rows
    host_csv = (tmp_path / "c" / "host.csv").read_text().splitlines()
    assert len(host_csv) - 1 == len(host_rows) and "cpu_busy_pct" in host_csv[0]

    # Once killed it may be deleted: directory and catalog row together.
    deleted = cli("runs", "rm", "--results", str(results), run_dir.name)
    assert deleted.returncode == 0, deleted.stderr
    assert f"deleted {run_dir.name}: run, killed" in deleted.stdout
    assert not run_dir.exists()
    assert json.loads(cli("runs", "--results", str(results), "--json").stdout) == []


# -----------------------------------------------------------------------------------------------
# a results filesystem that fills up

# The interval log writes one batch per second of run time: 100 intervals of 8 streams, each
# row with its latency histogram (~50 KiB compressed here, more as the null backend's latency
# spreads; 200 intervals of 5 ms no longer fit beside the reserve on 640 KiB). The filesystems
# leave room for about four such batches beside the run's reserve (512 KiB), so more than 10
# intervals fit even if the histograms grow fourfold, and 60 s of intervals do not.
MANY_STREAMS = """
target = "{target}"
size = "16m"
backend = "null"
duration = "60s"
interval = "10ms"
[defaults]
rw = "randread"
""" + '[[stream]]\n' * 8  # fmt: skip


@pytest.mark.parametrize(("kind", "size"), [("tmpfs", "768k"), ("ext4", "768k")])
def test_results_filesystem_filling_up_fails_the_run_and_keeps_what_fit(tmp_path, kind, size):
    need_root()
    workload = tmp_path / "many.toml"
    workload.write_text(MANY_STREAMS.format(target=tmp_path / "t.dat"))
    with small_filesystem(tmp_path / "small", size, kind) as mnt:
        results = mnt / "results"
        proc = subprocess.run(
            [tilemark(), "run", str(workload), "--results", str(results)],
            capture_output=True,
            text=True,
            timeout=120,
            env=_env(),
        )
        assert proc.returncode == 1, proc.stderr
        assert "Traceback" not in proc.stderr
        assert "run failed: results could not be written: No space left on device (ENOSPC)" in (
            proc.stderr.replace("\n", "")
        )
        assert "total" in proc.stdout, "the summary table is still printed"
        assert "failed" in proc.stdout
        (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
        doc = json.loads((run_dir / "run.json").read_text())
        assert doc["status"] == "failed" and doc["complete"] is False
        assert "ENOSPC" in doc["error"] and doc["summary"]["total"]["iops"] > 0
        assert leftovers(mnt) == [] and not (run_dir / ".reserve").exists()

        table = read_intervals(run_dir)
        intervals = sorted(set(table.column("interval").to_pylist()))
        assert len(intervals) > 10 and intervals == list(range(len(intervals)))
        measured = sum(doc["result"]["streams"][i]["read"]["ops"] for i in range(8))
        assert 0 < sum(table.column("ops").to_pylist()) <= measured

        listed = cli("runs", "--results", str(results), "--json")
        assert listed.returncode == 0, listed.stderr
        assert [r["status"] for r in json.loads(listed.stdout)] == ["failed"]
        out = tmp_path / "r.html"
        report = cli("report", run_dir.name, "--results", str(results), "-o", str(out))
        assert report.returncode == 0, report.stderr
        assert "ENOSPC" in out.read_text()


def test_results_filesystem_too_small_to_start_is_one_sentence(tmp_path):
    with small_filesystem(tmp_path / "tiny", "128k") as mnt:
        proc = start_run(tmp_path / "t.dat", mnt / "results", "--duration", "5")
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 1, err
        assert "Traceback" not in err
        assert "cannot write results under" in err and "No space left on device" in err
        assert list((mnt / "results").iterdir()) == [], "no half-made run directory"


# -----------------------------------------------------------------------------------------------
# read-only results


def test_read_only_results_are_listed_and_reported_without_writing(tmp_path):
    target = tmp_path / "t.dat"
    with small_filesystem(tmp_path / "ro", "4m") as mnt:
        results = mnt / "results"
        done = start_run(target, results, "--duration", "1", "--interval", "0.2")
        assert done.wait(timeout=60) == 0, done.communicate()
        (run_dir,) = [d for d in results.iterdir() if d.is_dir()]
        (results / "catalog.duckdb").unlink()  # listing must not need to create one
        remount_read_only(mnt)

        listed = cli("runs", "--results", str(results))
        assert listed.returncode == 0, listed.stderr
        assert run_dir.name in listed.stdout and "complete" in listed.stdout
        assert not (results / "catalog.duckdb").exists()

        default = cli("report", run_dir.name, "--results", str(results))
        assert default.returncode == 2 and "Traceback" not in default.stderr
        assert "Read-only file system (EROFS); write it elsewhere with -o FILE" in default.stderr
        assert len(default.stderr.strip().splitlines()) == 1
        png = cli("report", run_dir.name, "--results", str(results), "--png", str(run_dir / "p"))
        assert png.returncode == 2 and "--png" in png.stderr and "Traceback" not in png.stderr
        elsewhere = tmp_path / "r.html"
        report = cli("report", run_dir.name, "--results", str(results), "-o", str(elsewhere))
        assert report.returncode == 0 and elsewhere.is_file()
        rm = cli("runs", "rm", "--results", str(results), run_dir.name)
        assert rm.returncode == 2 and "read-only" in rm.stderr
        assert run_dir.is_dir()
