"""Telemetry's arithmetic and device resolution on shaped inputs: iostat -x's formulas, CPU
shares, pressure, the tool-bound verdict, interval alignment, sysfs trees (dm, partitions)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from tilemark.telemetry import envinfo
from tilemark.telemetry import sampler as tm

# /proc/diskstats: major minor name, then reads merged sectors ms, writes merged sectors ms,
# in-flight, io_ticks, weighted ms (and discard/flush fields on newer kernels).
DISKSTATS_0 = """\
 254       0 vda 1000 10 8000 500 2000 20 16000 1500 0 900 2100 0 0 0 0 0 0
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
"""
DISKSTATS_1 = """\
 254       0 vda 1400 30 11200 900 2600 50 20800 2700 3 1400 3700 0 0 0 0 0 0
   7       0 loop0 5 0 40 1 0 0 0 0 0 1 1 0 0 0 0 0 0
"""


def test_device_figures_follow_iostat_x():
    a = (1000, 10, 8000, 500, 2000, 20, 16000, 1500, 0, 900, 2100)
    b = (1400, 30, 11200, 900, 2600, 50, 20800, 2700, 3, 1400, 3700)
    f = tm.device_figures(a, b, 0.5)
    assert (f["reads"], f["writes"]) == (400, 600)
    assert f["read_iops"] == pytest.approx(800.0)  # 400 / 0.5 s
    assert f["write_iops"] == pytest.approx(1200.0)
    assert f["read_mbps"] == pytest.approx(3200 * 512 / 1e6 / 0.5)
    assert f["write_mbps"] == pytest.approx(4800 * 512 / 1e6 / 0.5)
    assert f["read_merges_s"] == pytest.approx(40.0) and f["write_merges_s"] == pytest.approx(60.0)
    assert f["r_await_ms"] == pytest.approx(400 / 400)  # ms reading / reads
    assert f["w_await_ms"] == pytest.approx(1200 / 600)
    assert f["aqu_sz"] == pytest.approx(1600 / 500)  # weighted ms / interval ms
    assert f["util_pct"] == pytest.approx(100 * 500 / 500)  # io ms / interval ms
    assert f["in_flight"] == 3  # a gauge: the value at the end
    idle = tm.device_figures(a, a, 0.5)
    assert idle["r_await_ms"] is None and idle["util_pct"] == 0
    # io_ticks move in whole jiffies: 252 ms busy in a 250 ms sample is a busy device, 100%.
    over = b[:9] + (a[9] + 252,) + b[10:]
    assert tm.device_figures(a, over, 0.25)["util_pct"] == 100.0


def test_diskstats_of_the_named_devices_only(tmp_path, monkeypatch):
    stats = tmp_path / "diskstats"
    stats.write_text(DISKSTATS_1)
    monkeypatch.setattr(tm, "PROC_DISKSTATS", stats)
    got = tm.read_diskstats({"254:0"})
    assert list(got) == ["254:0"] and got["254:0"][:3] == (1400, 30, 11200)
    assert tm.read_diskstats({"8:0"}) == {}


def test_cpu_shares_and_busy():
    # user nice system idle iowait irq softirq steal
    a = (100, 0, 50, 800, 40, 0, 10, 0)
    b = (160, 20, 90, 1000, 100, 5, 15, 10)
    f = tm.cpu_figures(a, b)
    total = 60 + 20 + 40 + 200 + 60 + 5 + 5 + 10
    assert f["cpu_user_pct"] == pytest.approx(100 * 80 / total)
    assert f["cpu_system_pct"] == pytest.approx(100 * 50 / total)
    assert f["cpu_iowait_pct"] == pytest.approx(100 * 60 / total)
    assert f["cpu_steal_pct"] == pytest.approx(100 * 10 / total)
    assert f["cpu_busy_pct"] == pytest.approx(100 - f["cpu_idle_pct"] - f["cpu_iowait_pct"])
    assert tm.cpu_figures(None, b)["cpu_busy_pct"] is None


def test_pressure_is_read_and_turned_into_a_share_of_the_interval(tmp_path, monkeypatch):
    psi = tmp_path / "pressure"
    psi.mkdir()
    (psi / "io").write_text(
        "some avg10=44.00 avg60=10.00 avg300=1.00 total=1000000\n"
        "full avg10=20.00 avg60=5.00 avg300=0.50 total=500000\n"
    )
    monkeypatch.setattr(tm, "PROC_PRESSURE", psi)
    first = tm.read_pressure()
    assert first["io_some_avg10"] == 44.0 and first["io_full_total"] == 500000
    assert "cpu_some_avg10" not in first  # no file: no figure
    a, b = object.__new__(tm.Sample), object.__new__(tm.Sample)
    for s, t, psi_values in ((a, 0, first), (b, 500_000_000, dict(first))):
        s.t_ns, s.cpu, s.psi = t, None, psi_values
        s.engine_ticks = s.aggregate_ticks = s.process_ticks = None
    b.psi["io_some_total"] = 1_000_000 + 220_000  # 0.22 s of the 0.5 s stalled
    f = tm.host_figures(a, b)
    assert f["io_some_pct"] == pytest.approx(44.0)
    assert f["io_full_pct"] == pytest.approx(0.0)
    assert f["cpu_some_pct"] is None and f["engine_cpu_pct"] is None


def test_tool_bound_by_host_cpu_or_by_a_stream_behind_schedule():
    summary = {
        "streams": [
            {"name": "paced", "arrival": "open", "read": {"ops": 1000}, "write": None,
             "ios_issued_late": 50},
            {"name": "closed", "arrival": "closed", "read": {"ops": 1000}, "ios_issued_late": 0},
        ]
    }  # fmt: skip
    verdict = tm.tool_bound(summary, {"cpu_busy_pct": 90.0})
    assert verdict["tool_bound"] is True
    assert len(verdict["reasons"]) == 2
    assert "host CPU 90% busy" in verdict["reasons"][0]
    assert "paced issued 5.0%" in verdict["reasons"][1]
    line = tm.tool_bound_line(verdict)
    assert line.startswith("tool-bound: host CPU 90% busy") and "\n" not in line
    on_time = {"streams": [{**summary["streams"][0], "ios_issued_late": 5}]}
    assert tm.tool_bound(on_time, {"cpu_busy_pct": 50.0}) == {"tool_bound": False, "reasons": []}
    assert tm.tool_bound(on_time, None)["tool_bound"] is False


def test_many_late_streams_are_one_reason_with_the_worst_and_a_count():
    # 24 streams of 2 tiles, all behind their schedule: one line, not 24 (issue 29).
    streams = [
        {"name": f"t{i % 2 + 1}.s{i}", "arrival": "open", "read": {"ops": 1000},
         "ios_issued_late": 20 + i}
        for i in range(24)
    ]  # fmt: skip
    verdict = tm.tool_bound({"streams": streams}, {"cpu_busy_pct": 40.0})
    (reason,) = verdict["reasons"]
    assert reason.startswith("24 of 24 open-loop streams issued more than 1% of their IOs")
    assert "worst t2.s23 4.3%" in reason
    assert tm.tool_bound_line(verdict).endswith(": the numbers describe the host, not the storage")
    assert tm.tool_bound_line({"tool_bound": False, "reasons": []}) is None


def test_the_sampler_follows_the_engines_interval_boundaries():
    after = tm.boundaries({"interval_ms": 1000, "warmup_ms": 1500})
    assert [after(0), after(1_000_000_000), after(1_500_000_000)] == [
        1_000_000_000,
        1_500_000_000,
        2_500_000_000,
    ]


def test_rows_wait_for_the_closing_sample_of_their_interval(tmp_path, monkeypatch):
    stats = tmp_path / "diskstats"
    stats.write_text(DISKSTATS_0)
    monkeypatch.setattr(tm, "PROC_DISKSTATS", stats)
    tele = tm.Telemetry({"interval_ms": 500}, [str(tmp_path)], run_id="r1")
    tele.devices = [{"name": "vda", "dev": "254:0", "kind": "disk", "depth": 0, "targets": [0]}]
    tele._devs = {"254:0"}
    tele._take(0)
    snap = {"interval": 0, "phase": "measure", "start_ns": 0, "end_ns": 500_000_000}
    assert tele.rows([snap]) == ([], [])  # its closing sample is not taken yet
    stats.write_text(DISKSTATS_1)
    tele._take(501_000_000)
    devices, host = tele.rows([])
    (row,) = devices
    assert (row["run_id"], row["interval"], row["device"], row["depth"]) == ("r1", 0, "vda", 0)
    assert row["sample_ns"] == 501_000_000 and row["reads"] == 400
    assert row["read_iops"] == pytest.approx(400 / 0.501)
    assert len(host) == 1 and host[0]["sample_ns"] == 501_000_000
    totals = tele.totals.devices()
    assert totals[0]["read_iops"] == pytest.approx(400 / 0.501)
    table = tm.front_vs_back({"read_iops": 1600.0, "write_iops": 0.0}, totals)
    assert table[1]["read_iops_ratio"] == pytest.approx(400 / 0.501 / 1600)
    assert table[1]["write_iops_ratio"] is None  # tilemark wrote nothing: no ratio
    assert "vda" in tele.live_line() and "util" in tele.live_line()
    summary = {"total": {"read_iops": 1600.0}}
    summary["telemetry"] = tm.summarize_telemetry(summary, tele.totals)
    back = tm.back_end(summary)
    assert back["device_read_iops"] == pytest.approx(400 / 0.501) and back["device_util"] > 0
    assert tm.back_end({})["device_iops"] is None


def _sysfs(root: Path) -> Path:
    """A sysfs shaped like the kernel's: dm-0 over a partition vdb1 and a whole disk vdc."""
    devices = root / "devices"
    vdb = devices / "pci0000:00/virtio3/block/vdb"
    vdb1 = vdb / "vdb1"
    vdc = devices / "pci0000:00/virtio4/block/vdc"
    dm = devices / "virtual/block/dm-0"
    for node, dev in ((vdb, "254:16"), (vdb1, "254:17"), (vdc, "254:32"), (dm, "253:0")):
        node.mkdir(parents=True)
        (node / "dev").write_text(dev + "\n")
    (vdb1 / "partition").write_text("1\n")
    (dm / "dm").mkdir()
    (dm / "dm" / "name").write_text("vg-data\n")
    (dm / "slaves").mkdir()
    (dm / "slaves" / "vdb1").symlink_to(vdb1)
    (dm / "slaves" / "vdc").symlink_to(vdc)
    links = root / "dev/block"
    links.mkdir(parents=True)
    for node in (vdb, vdb1, vdc, dm):
        (links / (node / "dev").read_text().strip()).symlink_to(node)
    return links


def test_a_dm_device_resolves_to_its_slaves_and_a_partition_to_its_disk(tmp_path, monkeypatch):
    monkeypatch.setattr(envinfo, "SYS_DEV_BLOCK", _sysfs(tmp_path))
    tree = envinfo.block_tree(253, 0, mounts=[])
    assert (tree["name"], tree["kind"], tree["dm_name"]) == ("dm-0", "dm", "vg-data")
    part, disk = tree["children"]
    assert (part["name"], part["kind"]) == ("vdb1", "partition")
    assert [(c["name"], c["kind"]) for c in part["children"]] == [("vdb", "disk")]
    assert (disk["name"], disk["kind"], disk["children"]) == ("vdc", "disk", [])
    flat = envinfo.flat_devices({"devices": [tree]})
    assert [(d["name"], d["depth"]) for d in flat] == [
        ("dm-0", 0),
        ("vdb1", 1),
        ("vdb", 2),
        ("vdc", 1),
    ]
    assert envinfo.block_tree(8, 0, mounts=[]) is None


def test_a_file_on_tmpfs_has_no_block_device(tmp_path):
    shm = Path("/dev/shm")
    if envinfo.mount_for(str(shm), envinfo.read_mounts()) is None or not shm.is_dir():
        pytest.skip("no /dev/shm")
    tree = envinfo.device_tree(str(shm / "tilemark-telemetry-test"))
    if tree.get("fs_type") != "tmpfs":
        pytest.skip("/dev/shm is not tmpfs here")
    assert tree["devices"] == []
    assert tree["note"].startswith("no block device") and "tmpfs" in tree["note"]


def test_a_long_runs_charts_merge_intervals_and_keep_the_rates():
    from tilemark.report.telemetry import MAX_POINTS, front_back_series, host_series

    n = 1500
    front = {
        i: {"interval": i, "phase": "measure", "start_ns": i * 10**9,
            "end_ns": (i + 1) * 10**9, "reads": 100 if i % 2 else 300, "writes": 0}
        for i in range(n)
    }  # fmt: skip
    devices = [
        {"interval": i, "start_ns": i * 10**9, "end_ns": (i + 1) * 10**9, "sample_ns": 10**9,
         "device": "vda", "reads": 50, "writes": 0}
        for i in range(n)
    ]  # fmt: skip
    rows = front_back_series(front, devices)
    reads = [r for r in rows if r["group"] == "tilemark reads"]
    assert len(reads) <= MAX_POINTS
    # 1500 one-second intervals in 500 points of 3 s: every IO is still counted once.
    assert len(reads) == 500
    assert sum(r["iops"] * 3 for r in reads) == pytest.approx(
        sum(f["reads"] for f in front.values())
    )
    assert {round(r["iops"]) for r in reads} == {round(700 / 3), round(500 / 3)}
    assert all(r["iops"] == pytest.approx(50.0) for r in rows if r["group"] == "vda reads")
    host = [
        {"interval": i, "start_ns": i * 10**9, "end_ns": (i + 1) * 10**9, "sample_ns": 10**9,
         "cpu_busy_pct": 10.0 if i % 2 else 30.0}
        for i in range(n)
    ]  # fmt: skip
    busy = host_series(host)
    assert len(busy) == 500
    assert {round(r["pct"], 6) for r in busy} == {round(70 / 3, 6), round(50 / 3, 6)}


def test_engine_cpu_is_unknown_when_a_thread_ends_and_never_runs_backwards():
    # Thread 13 started since the first sample (5 ticks) and thread 11 used 10 more: 15.
    assert tm._ticks_used({"11": 90}, {"11": 100, "13": 5}) == 15
    # Thread 12 ended before the second sample: what it used since the first went with it,
    # so the engine's figure is unknown, not 15 (which the sum of those alive would give) nor
    # 100+5 - 140 = -35 (the difference of sums).
    assert tm._ticks_used({"11": 90, "12": 50}, {"11": 100, "13": 5}) is None
    assert tm._ticks_used(100, 130) == 30 and tm._ticks_used(130, 100) == 0


def test_the_front_ends_share_compares_engine_and_process_over_the_same_intervals():
    # The last interval's engine figure is unknown (a thread ended before its closing
    # sample); the process's is known, and holds the end of the run's own work. Both means
    # leave that interval out, so their difference is the front end's 3%, not
    # (9 x 150 + 180) / 10 - 147 = 6.
    totals = tm.Totals()
    cpu = {"engine_cpu_pct": 147.0, "aggregate_cpu_pct": 1.0, "process_cpu_pct": 150.0}
    rows = [{"phase": "measure", "sample_ns": 10**9, **cpu} for _ in range(9)]
    rows.append(
        {"phase": "measure", "sample_ns": 10**9, "engine_cpu_pct": None,
         "aggregate_cpu_pct": None, "process_cpu_pct": 180.0}
    )  # fmt: skip
    totals.add([], rows)
    host = totals.host()
    assert host["engine_cpu_pct"] == pytest.approx(147.0)
    assert host["aggregate_cpu_pct"] == pytest.approx(1.0)
    assert host["process_cpu_pct"] - host["engine_cpu_pct"] == pytest.approx(3.0)
    # Without any engine figure, the process's mean is over every interval.
    alone = tm.Totals()
    alone.add(
        [], [{"phase": "measure", "sample_ns": 10**9, "process_cpu_pct": p} for p in (10, 30)]
    )
    assert alone.host()["process_cpu_pct"] == pytest.approx(20.0)
    assert alone.host()["engine_cpu_pct"] is None


def test_the_sampler_finds_the_engines_io_and_aggregation_threads_by_name():
    # Linux keeps 15 bytes of a thread's name: a longer one would never match, and the
    # aggregation thread's CPU would read 0 and count as the front end's.
    from tilemark import engine

    stream = {"regions": [{"target": 0, "offset": 0, "length": 1 << 20}], "read_pct": 100.0,
              "sizes": [[4096, 1.0]], "pattern": {"kind": "random"}, "random_pct": 100.0,
              "align": 4096, "qd": 1, "arrival": {"kind": "closed"}, "burst": None,
              "sync": {"kind": "none"}, "compress_pct": 0.0}  # fmt: skip
    plan = {"backend": "null", "threads": 2, "interval_ms": 50, "warmup_ms": 0,
            "duration_ms": 10_000, "poll_us": 0,
            "targets": [{"path": "/dev/null", "offset": 0, "length": 1 << 20, "direct": False}],
            "streams": [{**stream, "name": f"s{i}", "seed": i + 1} for i in range(2)]}  # fmt: skip
    handle = engine.start(plan)  # type: ignore[arg-type]
    try:
        # A thread names itself once it runs: the aggregation thread may not have yet.
        deadline = time.monotonic() + 5
        while True:
            names: dict[str, list[int]] = {}
            for task in os.listdir("/proc/self/task"):
                with open(f"/proc/self/task/{task}/comm") as f:
                    names.setdefault(f.read().strip(), []).append(int(task))
            if tm.AGGREGATE_THREAD in names or time.monotonic() > deadline:
                break
            time.sleep(0.01)
        assert len(names.get(tm.ENGINE_THREAD, [])) == 2, names
        (agg,) = names[tm.AGGREGATE_THREAD]
        engine_tid = names[tm.ENGINE_THREAD][0]
        # It yields to the IO threads as the front end does (run/priority.py), from its first
        # moment on (named first, then lowered).
        expected = min(19, os.getpriority(os.PRIO_PROCESS, engine_tid) + 5)
        while os.getpriority(os.PRIO_PROCESS, agg) != expected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert os.getpriority(os.PRIO_PROCESS, agg) == expected
        engine_ticks, aggregate_ticks, process = tm._thread_ticks()
        assert engine_ticks is not None and set(engine_ticks) == {
            str(t) for t in names[tm.ENGINE_THREAD]
        }
        assert set(aggregate_ticks or {}) == {str(agg)} and process is not None
    finally:
        handle.stop()
        handle.result()
