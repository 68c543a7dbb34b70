"""A real `tilemark run` process interrupted by Ctrl-C or SIGTERM keeps what it measured."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest


def tilemark() -> str:
    return str(Path(sys.executable).with_name("tilemark"))


@pytest.mark.parametrize(("signum", "status"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
@pytest.mark.quick
def test_interrupted_run_is_stored_incomplete_with_its_intervals(tmp_path, signum, status):
    cmd = [
        tilemark(), "run", "--target", str(tmp_path / "t.dat"), "--size", "64m",
        "--rw", "randread", "--qd", "4", "--duration", "60", "--interval", "0.5",
        "--results", str(tmp_path / "results"),
    ]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    runs = tmp_path / "results"
    # Wait until the run has flushed some intervals, then interrupt it.
    while time.monotonic() < deadline:
        dirs = [d for d in runs.glob("*-*") if (d / "run.json").exists()] if runs.exists() else []
        if dirs and json.loads((dirs[0] / "run.json").read_text())["status"] == "running":
            time.sleep(2.5)
            break
        time.sleep(0.1)
    t0 = time.monotonic()
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=30)
    assert time.monotonic() - t0 < 5, "stopping must be prompt"
    assert proc.returncode == status, err
    assert "Traceback" not in err
    assert "interrupted: results kept, marked incomplete" in err
    (run_dir,) = [d for d in runs.iterdir() if (d / "run.json").exists()]
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] == "incomplete" and doc["complete"] is False
    table = pq.read_table(run_dir / "intervals.parquet")
    assert table.num_rows >= 4
    ops = sum(table.column("ops").to_pylist())
    measured = doc["result"]["streams"][0]["read"]["ops"]
    assert ops == measured > 0, "interval rows add up to the stored totals"
