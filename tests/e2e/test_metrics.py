"""--metrics-port: a Prometheus endpoint scraped during a real run and parsed with the official
client library's parser (docs/metrics.md)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

TILEMARK = [str(Path(sys.executable).parent / "tilemark")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port: int) -> dict[str, list]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        text = r.read().decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def value(samples: list, **labels: str) -> float:
    found = [s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (labels, samples)
    return found[0]


def test_a_tile_run_is_scraped_while_it_runs(tmp_path):
    port = free_port()
    cmd = [*TILEMARK, "run", "--tiles", "1", "--target", str(tmp_path / "t.dat")]
    cmd += ["--capacity", "64m", "--duration", "4", "--warmup", "0", "--interval", "0.5"]
    cmd += ["--results", str(tmp_path / "r"), "--metrics-port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    scrapes = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                families = scrape(port)
            except OSError:
                time.sleep(0.2)  # not listening yet (the target is being filled)
                continue
            if families.get("tilemark_iops"):
                scrapes.append(families)
            time.sleep(0.7)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode in (0, 3), err  # 3: a tile's QoS failed on a busy disk
    assert len(scrapes) >= 2, err
    first, last = scrapes[0], scrapes[-1]
    # Per stream and op, and per application, from the latest interval.
    (run_id,) = {s.labels["run"] for s in last["tilemark_iops"]}
    assert run_id and run_id in out + err
    oltp_reads = [
        s for s in last["tilemark_iops"] if s.labels["app"] == "oltp" and s.labels["op"] == "read"
    ]
    # Only the ops a stream issues: OLTP's data file reads, not its redo log's.
    assert oltp_reads and all(s.labels["stream"].endswith(".data") for s in oltp_reads), oltp_reads
    assert all(s.value > 0 for s in oltp_reads)
    assert value(last["tilemark_app_iops"], app="oltp", op="read") == sum(
        s.value for s in oltp_reads
    )
    quantiles = {
        s.labels["quantile"]: s.value
        for s in last["tilemark_app_latency_seconds"]
        if s.labels["app"] == "oltp" and s.labels["op"] == "read"
    }
    assert set(quantiles) == {"0.5", "0.99", "0.999"}
    assert 0 < quantiles["0.5"] <= quantiles["0.99"] <= quantiles["0.999"] < 10

    # Counters only grow while the run goes on.
    def ios(families):
        return sum(s.value for s in families["tilemark_ios"])

    assert ios(last) > ios(first) > 0
    assert sum(s.value for s in last["tilemark_io_errors"]) == 0
    # The devices underneath the target and the host.
    assert last["tilemark_device_utilization_ratio"]
    assert {s.labels["what"] for s in last["tilemark_host_ratio"]} == {"cpu_busy", "io_pressure"}


def test_the_endpoint_listens_on_loopback_only_by_default(tmp_path):
    port = free_port()
    cmd = [*TILEMARK, "run", "--target", str(tmp_path / "t.dat"), "--size", "16m"]
    cmd += ["--duration", "3", "--rate", "100", "--results", str(tmp_path / "r")]
    cmd += ["--metrics-port", str(port)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                scrape(port)
                break
            except OSError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.1)
        listening = subprocess.run(
            ["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=False
        ).stdout
        # State, Recv-Q, Send-Q, local address, peer: one listener, on loopback.
        assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        proc.communicate(timeout=30)
    assert proc.returncode == 0


def test_a_port_in_use_is_refused_before_any_io(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [
                *TILEMARK,
                "run",
                "--target",
                str(tmp_path / "t.dat"),
                "--size",
                "16m",
                "--duration",
                "1",
                "--results",
                str(tmp_path / "r"),
                "--metrics-port",
                str(port),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    assert done.returncode == 2
    assert f"--metrics-port {port} cannot be served" in done.stderr
    assert "Traceback" not in done.stderr
    assert not Path(tmp_path / "t.dat").exists()
