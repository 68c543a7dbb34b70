"""A real `tilemark run` process interrupted by Ctrl-C or SIGTERM keeps what it measured."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
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
    # Interrupt once four measured intervals have been printed (one plain line per interval on
    # stderr, which is not a terminal): however long preparing the target took on a busy host.
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if sum(line.startswith("[measure") for line in list(lines)) >= 4:
            break
        time.sleep(0.05)
    runs = tmp_path / "results"
    t0 = time.monotonic()
    proc.send_signal(signum)
    proc.wait(timeout=30)  # not communicate(): the reader thread owns stderr
    reader.join(timeout=10)
    err = "".join(lines)
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
