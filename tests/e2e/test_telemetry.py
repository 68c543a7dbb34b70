"""Telemetry on real rigs: what the devices underneath did, beside what tilemark issued.

An O_DIRECT run on a loop device must see the loop device complete as many IOs as tilemark
issued; a buffered run over a file that fits the page cache must see the cache absorb reads;
a target whose device sysfs does not know still runs, with telemetry saying "unavailable".
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tilemark.cli import main
from tilemark.telemetry import envinfo
from tilemark.telemetry import sampler as tm

from .rigs import loop_device, need_root, ram_dir, small_filesystem
from .test_report_browser import check_report

pytestmark = [pytest.mark.root, pytest.mark.loopdev]
MiB = 1 << 20


def _run(tmp_path: Path, *args: str) -> tuple[dict, Path]:
    results = tmp_path / "results"
    code = main(["run", *args, "--duration", "1.5", "--interval", "250ms",
                 "--results", str(results)])  # fmt: skip
    assert code == 0
    (run_dir,) = [p for p in results.iterdir() if (p / "run.json").is_file()]
    return json.loads((run_dir / "run.json").read_text()), run_dir


def _backing_on_tmpfs(tmp_path: Path) -> Path:
    return ram_dir() / f"tilemark-telemetry-{tmp_path.name}.img"


def test_o_direct_on_a_loop_device_matches_the_device_iops(tmp_path):
    image = _backing_on_tmpfs(tmp_path)
    try:
        with loop_device(image, 64 * MiB) as dev:
            doc, run_dir = _run(
                tmp_path, "--target", dev, "--destroy-data", dev, "--rw", "randrw",
                "--bs", "4k", "--qd", "4",
            )  # fmt: skip
    finally:
        image.unlink(missing_ok=True)
    name = Path(dev).name
    # Provenance: the loop device, its backing file on tmpfs with no block device under it.
    (tree,) = doc["telemetry"]["targets"]
    (node,) = tree["devices"]
    assert (node["name"], node["kind"]) == (name, "loop")
    assert node["backing_file"] == str(image)
    assert node["backing"]["fs_type"] == "tmpfs" and "no block device" in node["backing"]["note"]
    assert doc["files"]["devices"] == "devices.parquet" and doc["files"]["host"] == "host.parquet"

    summary = doc["summary"]
    front, back = summary["telemetry"]["front_vs_back"]
    assert front["name"] == "tilemark" and back["name"] == name
    total = summary["total"]
    assert total["read_iops"] > 1000 and total["write_iops"] > 1000
    # What the loop device completed is what tilemark issued, read and write separately.
    assert back["read_iops"] == pytest.approx(total["read_iops"], rel=0.05)
    assert back["write_iops"] == pytest.approx(total["write_iops"], rel=0.05)
    assert back["read_iops_ratio"] == pytest.approx(1.0, rel=0.05)
    assert summary["tool_bound"]["tool_bound"] in (True, False)  # a loaded host may be

    devices = pq.read_table(run_dir / "devices.parquet")
    assert devices.schema.names == tm.DEVICE_SCHEMA.names
    rows = devices.to_pylist()
    assert {r["device"] for r in rows} == {name}
    intervals = pq.read_table(run_dir / "intervals.parquet", columns=["interval"])
    assert {r["interval"] for r in rows} == set(intervals.column("interval").to_pylist())
    # The rows add up to the devices' totals, and agree with iostat's formulas.
    measured = [r for r in rows if r["phase"] == "measure"]
    reads = sum(r["reads"] for r in measured)
    seconds = sum(r["sample_ns"] for r in measured) / 1e9
    assert back["read_iops"] == pytest.approx(reads / seconds)
    for r in measured:
        assert r["read_iops"] == pytest.approx(r["reads"] / (r["sample_ns"] / 1e9))
        assert 0 <= r["util_pct"] <= 100.5
        assert r["aqu_sz"] == pytest.approx(r["weighted_ms"] / (r["sample_ns"] / 1e6))
    host = pq.read_table(run_dir / "host.parquet")
    assert host.schema.names == tm.HOST_SCHEMA.names
    host_rows = host.to_pylist()
    assert len(host_rows) == len(set(intervals.column("interval").to_pylist()))
    for h in host_rows:
        parts = ("user", "system", "iowait", "steal", "idle")
        assert sum(h[f"cpu_{p}_pct"] for p in parts) == pytest.approx(100.0)
    # The engine threads may have ended before the closing sample of the last interval.
    assert all(h["engine_cpu_pct"] >= 0 for h in host_rows[:-1])
    assert all(h["aggregate_cpu_pct"] >= 0 for h in host_rows[:-1])
    assert summary["telemetry"]["host"]["engine_cpu_pct"] > 0

    # What tilemark itself added (run/overhead.py): CPU per IO of every IO it completed, and
    # per direction its service time against the loop device's own time for the same IOs.
    overhead = summary["overhead"]
    ios = sum(s[op]["ops"] for s in summary["streams"] for op in ("read", "write"))
    assert overhead["ios"] == ios
    assert overhead["cpu_per_io_us"] > 0
    assert 0 <= overhead["engine_cpu_per_io_us"] <= overhead["cpu_per_io_us"]
    assert overhead["aggregate_cpu_pct"] >= 0 and overhead["front_end_cpu_pct"] >= 0
    # The uring IO threads' time with spinning allowed and batched (result.poller, weighted).
    assert 0 <= overhead["spin_allowed_pct"] <= 100 and 0 <= overhead["batched_pct"] <= 100
    by_op = {s["op"]: s for s in overhead["service"]}
    assert set(by_op) == {"read", "write"}
    for op, count in (("read", "reads"), ("write", "writes")):
        row = by_op[op]
        device_ios = sum(r[count] for r in measured)
        assert row["device"] == name and row["device_ios"] == device_ios
        assert row["device_mean_us"] == pytest.approx(back_await(measured, op) * 1e3, rel=0.01)
        # Each IO's time in the block layer lies inside tilemark's submission-to-reaping time.
        assert row["mean_us"] >= 0.98 * row["device_mean_us"]
        assert row["above_device_us"] == pytest.approx(row["mean_us"] - row["device_mean_us"])


def back_await(rows: list[dict], op: str) -> float:
    """iostat's r_await/w_await over the rows, ms: the device's time per IO."""
    ticks, count = ("read_ms", "reads") if op == "read" else ("write_ms", "writes")
    return sum(r[ticks] for r in rows) / sum(r[count] for r in rows)


def test_buffered_reads_are_absorbed_by_the_page_cache(tmp_path):
    need_root()
    with small_filesystem(tmp_path / "mnt", "32m", kind="ext4") as mnt:
        target = mnt / "data.tm"
        doc, _ = _run(
            tmp_path, "--target", str(target), "--size", "4m", "--buffered",
            "--rw", "randread", "--bs", "4k", "--qd", "1",
        )  # fmt: skip
    (tree,) = doc["telemetry"]["targets"]
    assert tree["fs_type"] == "ext4"
    (loop,) = tree["devices"]
    assert loop["kind"] == "loop"
    # The image lies on tmp_path's filesystem: its device is under the loop device.
    backing_fs = envinfo.device_tree(str(tmp_path))
    if backing_fs["devices"]:
        assert [c["dev"] for c in loop["children"]] == [backing_fs["devices"][0]["dev"]]
    front, back = doc["summary"]["telemetry"]["front_vs_back"][:2]
    assert front["read_iops"] > 1000
    # 4 MiB fits the page cache: after the first touch of each page, reads never reach it.
    assert back["read_iops"] < front["read_iops"] / 4
    assert back["read_iops_ratio"] < 0.25
    # The device saw a few of tilemark's reads: its time per IO is not theirs, so no
    # service-above-the-device figure for reads.
    assert "read" not in {s["op"] for s in doc["summary"]["overhead"]["service"]}


def test_a_device_missing_in_sysfs_leaves_telemetry_unavailable_and_the_run_goes_on(
    tmp_path, monkeypatch
):
    empty = tmp_path / "sysfs-without-devices"
    empty.mkdir()
    monkeypatch.setattr(envinfo, "SYS_DEV_BLOCK", empty)
    target = tmp_path / "data.tm"
    doc, run_dir = _run(tmp_path, "--target", str(target), "--size", "1m", "--rw", "randread")
    assert doc["status"] == "complete"
    notes = doc["telemetry"]["notes"]
    assert any("device telemetry unavailable" in n for n in notes)
    assert any("device telemetry unavailable" in n for n in doc["summary"]["notes"])
    assert doc["telemetry"]["devices"] == []
    assert pq.read_table(run_dir / "devices.parquet").num_rows == 0
    assert pq.read_table(run_dir / "host.parquet").num_rows > 0
    assert doc["summary"]["telemetry"]["front_vs_back"][0]["name"] == "tilemark"


def test_a_loop_device_resolves_to_its_backing_files_filesystem_device(tmp_path):
    backing_fs = envinfo.device_tree(str(tmp_path))
    if not backing_fs["devices"]:
        pytest.skip(f"{tmp_path} is not on a block device here ({backing_fs['fs_type']})")
    with loop_device(tmp_path / "disk.img", 8 * MiB) as dev:
        tree = envinfo.device_tree(dev)
    (node,) = tree["devices"]
    assert node["kind"] == "loop" and node["backing_file"] == str(tmp_path / "disk.img")
    assert node["backing"]["fs_type"] == backing_fs["fs_type"]
    assert node["children"] == backing_fs["devices"]
    flat = envinfo.flat_devices(tree)
    assert [d["depth"] for d in flat][:2] == [0, 1]
    assert flat[1]["dev"] == backing_fs["devices"][0]["dev"]


def test_a_dm_linear_device_resolves_to_its_slave(tmp_path):
    need_root()
    if not shutil.which("dmsetup"):
        pytest.skip("dmsetup not installed")
    with loop_device(tmp_path / "dm.img", 8 * MiB) as dev:
        name = f"tilemark-test-{tmp_path.name}"[:100]
        table = f"0 {8 * MiB // 512} linear {dev} 0\n"
        made = subprocess.run(["dmsetup", "create", name], input=table, capture_output=True,
                              text=True)  # fmt: skip
        if made.returncode != 0:
            pytest.skip(f"device-mapper is not available: {made.stderr.strip().splitlines()[0]}")
        try:
            tree = envinfo.device_tree(f"/dev/mapper/{name}")
        finally:
            subprocess.run(["dmsetup", "remove", name], check=False)
    (node,) = tree["devices"]
    assert node["kind"] == "dm" and node["dm_name"] == name
    assert [c["name"] for c in node["children"]] == [Path(dev).name]


def test_the_report_with_telemetry_opens_without_console_errors(browser, tmp_path):  # noqa: F811
    image = _backing_on_tmpfs(tmp_path)
    try:
        with loop_device(image, 32 * MiB) as dev:
            _, run_dir = _run(tmp_path, "--target", dev, "--destroy-data", dev, "--rw", "randrw")
    finally:
        image.unlink(missing_ok=True)
    report = tmp_path / "report.html"
    assert main(["report", str(run_dir), "-o", str(report)]) == 0
    html = report.read_text()
    assert "Front end (tilemark) vs back end (devices)" in html
    assert "Host CPU and pressure" in html
    check_report(browser, report, "telemetry", tmp_path)
