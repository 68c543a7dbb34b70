"""Many hosts, one run (docs/cluster.md), end to end on Dask workers on this machine: a
workload and a scale study across `local:3` with a file per worker, the hosts' start instants,
a two-target workload with a phase verified on every host of `local:2`, a worker killed
mid-run, a TLS cluster that accepts only certified clients, and hosts running another
tilemark refused. Every address is 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

pytest.importorskip("tilemark._engine", reason="the engine is not built (make build)")
pytest.importorskip("distributed", reason="cluster runs need distributed (make build)")

from tilemark.hist import Histogram  # noqa: E402

# Serial: the tests that hold timing to a bound (engines starting within 5 ms of each other, a
# lost worker named within two intervals); the others assert placement, merging, verification
# and refusals, which hold beside other tests.
pytestmark = [pytest.mark.cluster, pytest.mark.cost(15)]

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


@pytest.mark.serial
def test_a_workload_and_a_scale_study_across_three_workers(tmp_path: Path) -> None:
    results = tmp_path / "results"
    target = str(tmp_path / "tm-{worker}.dat")
    run = tilemark(
        "run", "--cluster", "local:3", "--target", target, "--size", "8m", "--rw", "randrw",
        "--bs", "4k", "--qd", "4", "--rate", "2000", "--duration", "1.5", "--interval", "0.25s",
        "--backend", "psync", "--results", str(results), "--json",
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    hosts = out["summary"]["hosts"]
    assert len(hosts) == 3
    assert {h["status"] for h in hosts} == {"ok"}
    assert all(h["address"].startswith("tcp://127.0.0.1:") for h in hosts), "loopback only"
    paths = sorted(t["path"] for h in hosts for t in h["targets"])
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


TWO_TARGETS = """
duration = "1.5s"
interval = "0.25s"
warmup = "0s"
backend = "psync"
verify = true
[[target]]
name = "db"
path = "{dir}/db-{{worker}}.dat"
size = "8m"
[[target]]
name = "log"
path = "{dir}/log-{{worker}}.dat"
size = "4m"
[[stream]]
name = "oltp"
target = "db"
rw = "randrw"
bs = "4k"
qd = 4
rate = 1000
[[stream]]
name = "logw"
target = "log"
rw = "write"
bs = "8k"
rate = 200
start = "0.5s"
[[stream]]
name = "both"
rw = "randread"
bs = "4k"
qd = 2
rate = 500
"""


def test_two_targets_on_two_workers_verified_per_host(tmp_path: Path) -> None:
    """A workload with two named targets and a phased stream on local:2: every worker has
    its own file of each target, the merged run's targets are the workload's (each the sum
    of the hosts' parts), every host keeps its journals, and a corrupted file on one host
    fails the run naming that host."""
    results = tmp_path / "results"
    workload = tmp_path / "two.toml"
    workload.write_text(TWO_TARGETS.format(dir=tmp_path))
    run = tilemark("run", str(workload), "--cluster", "local:2", "--results", str(results),
                   "--json")  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    summary = out["summary"]
    run_dir = Path(out["run_dir"])
    hosts = summary["hosts"]
    assert len(hosts) == 2 and {h["status"] for h in hosts} == {"ok"}
    # Per target name, merged across hosts: the counts are the hosts' parts added.
    assert [t["name"] for t in summary["targets"]] == ["db", "log"]
    assert summary["targets"][0]["path"] == f"{tmp_path}/db-{{worker}}.dat"
    for i, merged in enumerate(summary["targets"]):
        parts = [h["targets"][i] for h in hosts]
        assert all(p["name"] == merged["name"] for p in parts)
        for key in ("read_ops", "write_ops", "read_bytes", "write_bytes"):
            assert merged[key] == sum(p[key] for p in parts) > 0, (merged["name"], key)
    for h in hosts:
        paths = [t["path"] for t in h["targets"]]
        assert paths == [f"{tmp_path}/db-{h['worker']}.dat", f"{tmp_path}/log-{h['worker']}.dat"]
        assert all(Path(p).stat().st_size > 4 << 20 for p in paths), "each worker's own files"
    # The phased stream wrote only the log target, from 0.5 s on.
    logw = next(s for s in summary["streams"] if s["name"] == "logw")
    assert logw["targets"] == ["log"] and logw["start_s"] == 0.5
    assert (run_dir / "targets.parquet").exists()
    assert_merged_is_sum(run_dir)
    # Verification: each host's counts add up, its journals are kept in its directory.
    verified = summary["verification"]
    assert verified["findings"] == 0
    assert verified["checked"] == sum(h["verification"]["checked"] for h in hosts) > 0
    assert len(verified["journals"]) == 4
    assert all((run_dir / j).stat().st_size > 4096 for j in verified["journals"])

    # Damage host 1's db file behind tilemark's back: the next verified run finds it there.
    doc = json.loads((run_dir / "run.json").read_text())
    on_host = doc["targets"][0]["hosts"][1]
    with open(on_host["path"], "r+b") as f:
        f.seek(on_host["data_offset"])
        f.write(os.urandom(on_host["data_length"]))
        os.fsync(f.fileno())
    bad = tilemark("run", str(workload), "--cluster", "local:2", "--results", str(results),
                   "--json")  # fmt: skip
    assert bad.returncode == 1, bad.stderr
    bad_out = json.loads(bad.stdout)
    status = {h["name"]: h["status"] for h in bad_out["summary"]["hosts"]}
    assert status == {hosts[0]["name"]: "ok", hosts[1]["name"]: "data-errors"}, status
    found = bad_out["summary"]["verification"]
    assert found["findings"] >= 1 and found["listed"][0]["host"] == hosts[1]["name"]
    stored = json.loads((Path(bad_out["run_dir"]) / "run.json").read_text())
    assert stored["status"] == "data-errors"


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


@pytest.mark.serial
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
        while "[measure " not in seen:  # the first interval line: every host is running
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


def _certificates(directory: Path, ca_name: str) -> tuple[str, str, str]:
    """A CA and one certificate it signed for 127.0.0.1 (scheduler, workers and client alike):
    (ca.pem, cert.pem, key.pem)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(name(ca_name))
        .issuer_name(name(ca_name))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(name("tilemark"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    paths = (directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(pem_key(key))
    return str(paths[0]), str(paths[1]), str(paths[2])


def test_a_tls_cluster_accepts_a_certified_client_and_rejects_others(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster
    from distributed.security import Security

    ca, cert, key = _certificates(tmp_path / "good", "tilemark test CA")
    _, other_cert, other_key = _certificates(tmp_path / "other", "another CA")
    security = Security(
        tls_ca_file=ca,
        tls_scheduler_cert=cert,
        tls_scheduler_key=key,
        tls_worker_cert=cert,
        tls_worker_key=key,
        tls_client_cert=cert,
        tls_client_key=key,
        require_encryption=True,
    )
    with LocalCluster(
        n_workers=1,
        threads_per_worker=1,
        processes=True,
        protocol="tls://",
        host="127.0.0.1",
        security=security,
        dashboard_address=None,
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://127.0.0.1:")
        ok = tilemark(
            "run", "--cluster", address, "--tls-ca", ca, "--tls-cert", cert, "--tls-key", key,
            "--target", str(tmp_path / "tm-{worker}.dat"), "--size", "4m", "--backend", "null",
            "--duration", "0.5", "--interval", "0.25s", "--results", str(tmp_path / "r"),
            "--json",
        )  # fmt: skip
        assert ok.returncode == 0, ok.stderr
        assert len(json.loads(ok.stdout)["summary"]["hosts"]) == 1
        # A client with a certificate another CA signed is refused.
        with pytest.raises((OSError, TimeoutError)):
            Client(
                address,
                security=Security(
                    tls_ca_file=ca,
                    tls_client_cert=other_cert,
                    tls_client_key=other_key,
                    require_encryption=True,
                ),
                timeout=1.5,
            )
        # So is a TLS client without a certificate: the scheduler demands one.
        host, port = address.removeprefix("tls://").split(":")
        context = ssl.create_default_context(cafile=ca)
        context.check_hostname = False
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            with pytest.raises((ssl.SSLError, ConnectionError)):
                with context.wrap_socket(raw) as tls:
                    tls.sendall(b"\0" * 8)
                    if not tls.recv(1):
                        raise ConnectionError("closed without a certificate")
        # Unencrypted, not at all.
        with pytest.raises((OSError, TimeoutError)):
            Client(address.replace("tls://", "tcp://"), timeout=1.5)


def test_hosts_running_another_tilemark_are_refused(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    from tilemark.cluster.session import Session
    from tilemark.errors import UsageError

    preload = tmp_path / "other_version.py"
    preload.write_text("import tilemark\n\ntilemark.__version__ = '0.0.0+elsewhere'\n")
    with (
        LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address=None,
            preload=[str(preload)],
        ) as cluster,
        Client(cluster) as client,
    ):
        session = Session(client, spec="test")
        with pytest.raises(UsageError, match=r"runs tilemark version 0\.0\.0\+elsewhere"):
            session.attach_agents()
