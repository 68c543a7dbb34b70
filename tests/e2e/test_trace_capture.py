"""`tilemark trace capture` records what really reached a loop device (root, tracefs).

The requests in the trace are checked against what issued them: a tilemark run's own counts
(bytes, IO sizes, offsets of a sequential stream), a dd with a known count, and the pid/name
the kernel charged them to. A missing facility is one sentence, exit 2, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tilemark.trace.schema import open_trace

from .rigs import dev_numbers, loop_device, need_root, ram_dir, tilemark_exe

pytestmark = [pytest.mark.cost(13)]

TRACEFS = Path("/sys/kernel/tracing")


def need_tracing() -> None:
    need_root()
    events = TRACEFS / "events" / "block" / "block_rq_issue"
    if not (TRACEFS / "instances").is_dir():
        subprocess.run(["mount", "-t", "tracefs", "nodev", str(TRACEFS)], capture_output=True)
    if not events.is_dir():
        pytest.skip(f"no block tracepoints in tracefs ({events} missing): kernel without tracing")


def capture_cmd(dev: str, out: Path, *command: str) -> list[str]:
    return [tilemark_exe(), "trace", "capture", "--device", dev, "-o", str(out), "--", *command]


def rows(trace: Path) -> list[dict]:
    return open_trace(trace).table().to_pylist()


@pytest.fixture
def ram_loop(tmp_path):
    """A loop device over a 64 MiB file in tmpfs (no block device under it)."""
    need_tracing()
    image = ram_dir() / f"tilemark-test-capture-{os.getpid()}.img"
    try:
        with loop_device(image, 64 << 20) as dev:
            yield dev
    finally:
        image.unlink(missing_ok=True)


def run_under_capture(tmp_path: Path, dev: str, *run_args: str) -> tuple[dict, list[dict]]:
    """A tilemark run on `dev` traced by `trace capture -- ...`: (run summary, trace rows)."""
    summary = tmp_path / "run.json"
    run = [
        tilemark_exe(), "run", "--target", dev, "--destroy-data", dev, *run_args,
        "--json", "--results", str(tmp_path / "results"),
    ]  # fmt: skip
    shell = ["sh", "-c", '"$@" > "$0"', str(summary), *run]
    out = tmp_path / "run.parquet"
    done = subprocess.run(capture_cmd(dev, out, *shell), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "exit status 0" in done.stdout
    meta = open_trace(out).meta
    assert meta.events_lost == 0 and meta.extra["command_exit"] == 0
    target = json.loads(summary.read_text())["summary"]["targets"][0]
    return target, [r for r in rows(out) if r["device"] == dev_numbers(dev)]


def test_random_writes_of_a_run_are_all_in_the_trace(tmp_path, ram_loop):
    target, trace = run_under_capture(
        tmp_path, ram_loop, "--rw", "randwrite", "--bs", "8k", "--qd", "4", "--duration", "1s"
    )
    engine = [r for r in trace if r["comm"] == "tilemark-engine"]
    writes = [r for r in engine if r["op"] == "write"]
    assert target["write_ops"] > 1000
    # The block layer may merge two adjacent random writes of one batch into one request:
    # bytes are exact, requests at most a handful fewer than the engine's IOs.
    assert sum(r["size"] for r in writes) == target["write_bytes"]
    assert target["write_ops"] * 0.99 <= len(writes) <= target["write_ops"]
    assert all(r["size"] % 8192 == 0 and r["offset"] % 4096 == 0 for r in writes)
    assert all(0 <= r["offset"] and r["offset"] + r["size"] <= 64 << 20 for r in writes)
    assert len({r["pid"] for r in engine}) == 1, "one engine thread submitted them"
    assert all(r["latency_ns"] > 0 and r["complete_ns"] >= r["issue_ns"] for r in writes)
    # Each write's Q (the engine's submission) is its queue time, at or before its issue.
    assert all(r["queue_ns"] is not None and r["queue_ns"] <= r["issue_ns"] for r in writes)
    issued = [r["issue_ns"] for r in trace]
    assert issued == sorted(issued), "rows are in issue order"


def test_a_sequential_read_stream_is_traced_at_its_exact_offsets(tmp_path, ram_loop):
    target, trace = run_under_capture(
        tmp_path, ram_loop, "--rw", "read", "--bs", "16k", "--qd", "1", "--duration", "0.5s"
    )
    reads = [r for r in trace if r["comm"] == "tilemark-engine" and r["op"] == "read"]
    assert len(reads) == target["read_ops"] > 500
    assert all(r["size"] == 16384 for r in reads)
    first = reads[0]["offset"]
    area = 64 << 20
    expected = [(first + i * 16384) % area for i in range(len(reads))]
    assert [r["offset"] for r in reads] == expected


def test_capture_around_dd_counts_its_writes_and_the_backing_disk(tmp_path):
    """A loop device over a file on a disk: the loop's requests and the disk's are both
    recorded, told apart by the device column."""
    need_tracing()
    with loop_device(tmp_path / "disk.img", 16 << 20) as dev:
        out = tmp_path / "dd.parquet"
        dd = ["dd", "if=/dev/zero", f"of={dev}", "bs=64k", "count=40", "oflag=direct"]
        done = subprocess.run(capture_cmd(dev, out, *dd), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        trace = open_trace(out)
        devices = {d["dev"] for d in trace.meta.extra["devices"]}
        loop_rows = [r for r in rows(out) if r["device"] == dev_numbers(dev)]
    writes = [r for r in loop_rows if r["op"] == "write"]
    assert len(writes) == 40 and {r["size"] for r in writes} == {65536}
    assert [r["offset"] for r in writes] == [i * 65536 for i in range(40)]
    assert {r["comm"] for r in writes} == {"dd"}
    assert trace.meta.command == dd and trace.meta.extra["command_exit"] == 0
    assert "requests: 40 " in done.stdout or len(devices) > 1
    if len(devices) > 1:  # the image's filesystem has a block device (not tmpfs)
        below = [r for r in rows(out) if r["device"] != dev_numbers(dev) and r["op"] == "write"]
        assert below and sum(r["size"] for r in below) >= 40 * 65536
        # The trace file went to that disk too, and the trace says so.
        assert any("written to a traced device" in n for n in trace.meta.notes)


def test_ctrl_c_stops_the_capture_and_keeps_a_complete_trace(tmp_path, ram_loop):
    out = tmp_path / "int.parquet"
    cmd = [tilemark_exe(), "trace", "capture", "--device", ram_loop, "-o", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    line = proc.stderr.readline()  # printed once tracing is on
    assert "Ctrl-C stops" in line, line
    subprocess.run(["dd", f"if={ram_loop}", "of=/dev/null", "bs=4k", "count=100", "iflag=direct"])
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert "stopped by: SIGINT" in stdout
    assert not (TRACEFS / "instances" / f"tilemark-{proc.pid}").exists(), "tracing cleaned up"
    trace = open_trace(out)
    assert trace.meta.extra["interrupted"] is True
    assert any("interrupted by SIGINT" in n for n in trace.meta.notes)
    assert sum(1 for r in rows(out) if r["comm"] == "dd" and r["op"] == "read") == 100


def assert_refused(done: subprocess.CompletedProcess, out: Path) -> None:
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tilemark: error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert list(out.parent.iterdir()) == [], "nothing written"


def test_without_tracefs_capture_says_so_and_writes_nothing(tmp_path, ram_loop):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "t.parquet"
    env = {**os.environ, "TILEMARK_TRACEFS": str(tmp_path / "no-tracefs")}
    done = subprocess.run(
        capture_cmd(ram_loop, out, "true"), capture_output=True, text=True, env=env
    )
    assert_refused(done, out)
    assert "tracefs" in done.stderr


def test_a_user_who_is_not_root_is_told_so(tmp_path, ram_loop):
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) not installed")
    out_dir = tmp_path / "out"
    out_dir.mkdir(mode=0o777)
    os.chmod(out_dir, 0o777)
    out = out_dir / "t.parquet"
    as_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    done = subprocess.run(
        [*as_nobody, *capture_cmd(ram_loop, out, "true")], capture_output=True, text=True
    )
    if "Permission denied" in done.stderr and "tilemark: error" not in done.stderr:
        pytest.skip("the test environment is not readable by an unprivileged user")
    assert_refused(done, out)
    assert "needs root" in done.stderr


def test_a_device_with_no_block_device_is_refused(tmp_path):
    need_tracing()
    out = tmp_path / "out" / "t.parquet"
    out.parent.mkdir()
    done = subprocess.run(capture_cmd(str(ram_dir()), out, "true"), capture_output=True, text=True)
    assert_refused(done, out)
    assert "tmpfs" in done.stderr
