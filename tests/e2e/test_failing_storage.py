"""IO errors during a run are counted per stream by errno, and the run still ends on time."""

from __future__ import annotations

import time

import pytest

from .engine_helpers import MiB, plan, run, stream
from .rigs import failing_storage, loop_over

pytestmark = [pytest.mark.root, pytest.mark.nbd, pytest.mark.cost(30)]


def test_eio_and_enospc_are_counted_per_stream_and_the_run_ends(tmp_path):
    args = (
        "error-pread=EIO",
        "error-pread-rate=10%",
        "error-pwrite=ENOSPC",
        "error-pwrite-rate=20%",
    )
    with failing_storage(tmp_path / "mnt", "64M", *args) as disk:
        target = [{"path": str(disk), "offset": 0, "length": 64 * MiB, "direct": True}]
        streams = [
            stream("reader", length=32 * MiB, qd=4),
            stream("writer", offset=32 * MiB, length=32 * MiB, read_pct=0.0, qd=4),
        ]
        t0 = time.monotonic()
        _, result = run(plan(disk, streams, targets=target, duration_ms=1500))
        elapsed = time.monotonic() - t0
    assert elapsed < 10, "the run must not hang on failing IO"
    reader, writer = result["streams"]
    failed_reads = reader["read"]["errors"].get("5", 0)
    failed_writes = writer["write"]["errors"].get("28", 0)
    assert set(reader["read"]["errors"]) == {"5"} and set(writer["write"]["errors"]) == {"28"}
    share_r = failed_reads / (failed_reads + reader["read"]["ops"])
    share_w = failed_writes / (failed_writes + writer["write"]["ops"])
    assert 0.05 < share_r < 0.15, share_r
    assert 0.12 < share_w < 0.28, share_w
    assert reader["write"]["errors"] == {} and writer["read"]["errors"] == {}


def _errors_once_running(trigger, results):
    """nbdkit's error filter injects errors only while `trigger` exists (error-file=): create
    it once the run has started, after tilemark's marker check read the first block."""
    import threading
    import time

    def watch():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if results.exists() and any(results.glob("*/run.json")):
                trigger.touch()
                return
            time.sleep(0.01)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _cli(capsys, *args):
    from tilemark.cli import main

    status = main(list(args))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_failing_storage_fails_the_run_with_errno_names(tmp_path, capsys):
    """10% of reads fail with EIO: the run ends with status errors and exit 1 (it used to end
    'complete' with exit 0), and EIO is named per stream, in the terminal and the summary."""
    import json
    from pathlib import Path

    trigger = tmp_path / "inject"
    args = ("error-pread=EIO", "error-pread-rate=10%", f"error-file={trigger}")
    with failing_storage(tmp_path / "mnt", "32M", *args) as disk:
        _errors_once_running(trigger, tmp_path / "r")
        status, out, err = _cli(
            capsys, "run", "--target", str(disk), "--rw", "randread", "--qd", "4",
            "--duration", "1", "--json", "--results", str(tmp_path / "r"),
        )  # fmt: skip
    assert status == 1, err
    doc = json.loads(out)
    assert doc["complete"] is False
    (stream,) = doc["summary"]["streams"]
    assert set(stream["errors_by_name"]) == {"EIO"} and stream["errors_by_name"]["EIO"] > 0
    assert doc["summary"]["total"]["errors_by_name"] == stream["errors_by_name"]
    stored = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert stored["status"] == "errors"
    assert "IOs failed (EIO" in stored["error"]
    assert "(IO errors)" in err and "EIO" in err and "run failed:" in err
    assert "Traceback" not in err


def test_the_first_io_error_stops_a_run_by_default_and_max_errors_tolerates_more(tmp_path, capsys):
    import json

    trigger = tmp_path / "inject"
    args = ("error-pread=EIO", "error-pread-rate=10%", f"error-file={trigger}")
    common = ("--rw", "randread", "--qd", "4", "--json")
    with failing_storage(tmp_path / "mnt", "32M", *args) as disk:
        _errors_once_running(trigger, tmp_path / "r1")
        status, out, err = _cli(
            capsys, "run", "--target", str(disk), "--duration", "20", *common,
            "--results", str(tmp_path / "r1"),
        )  # fmt: skip
        first = json.loads(out)
        trigger.unlink()  # no errors again until the second run has started
        _errors_once_running(trigger, tmp_path / "r2")
        status2, out2, _ = _cli(
            capsys, "run", "--target", str(disk), "--duration", "1", "--max-errors", "-1",
            *common, "--results", str(tmp_path / "r2"),
        )  # fmt: skip
        tolerated = json.loads(out2)
    # Stopped at once by the first failed read (one more per stream may already be out).
    assert status == 1 and first["summary"]["duration_s"] < 5
    assert 1 <= first["summary"]["total"]["errors"] <= 5
    assert "exceeded --max-errors" in err
    # --max-errors -1: the whole second, with errors at the injected rate.
    assert status2 == 1 and tolerated["summary"]["duration_s"] >= 0.9
    assert tolerated["summary"]["total"]["errors"] > 10


def test_a_device_that_stops_answering_is_stored_as_hung_within_the_timeout(tmp_path, capsys):
    import json
    import time
    from datetime import datetime
    from pathlib import Path

    # Every read takes 3 s: the marker check before the run waits for its one read (it may take
    # up to 5 s), then the run's first read passes the 0.5 s IO timeout.
    with failing_storage(tmp_path / "mnt", "16M", "rdelay=3", nbd_filter="delay") as disk:
        t0 = time.monotonic()
        status, out, err = _cli(
            capsys, "run", "--target", str(disk), "--rw", "randread", "--duration", "60",
            "--io-timeout", "500ms", "--json", "--results", str(tmp_path / "r"),
        )  # fmt: skip
        elapsed = time.monotonic() - t0
    assert status == 1, err
    doc = json.loads(out)
    stored = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert stored["status"] == "hung"
    assert "never completed: stream randread read at offset" in stored["error"]
    assert "(IO hung)" in err and "Traceback" not in err
    # The run ended within the timeout plus a little, not the device's 3 s or the planned 60 s.
    started = datetime.fromisoformat(stored["started_at"])
    ended = datetime.fromisoformat(stored["ended_at"])
    assert (ended - started).total_seconds() < 2.5, (started, ended)
    assert elapsed < 3 + 4, elapsed


def test_a_target_whose_first_block_does_not_answer_is_one_sentence(tmp_path, capsys):
    import time

    with failing_storage(tmp_path / "mnt", "16M", "rdelay=8", nbd_filter="delay") as disk:
        t0 = time.monotonic()
        status, _, err = _cli(
            capsys, "run", "--target", str(disk), "--rw", "randread", "--duration", "60",
            "--io-timeout", "1", "--results", str(tmp_path / "r"),
        )  # fmt: skip
        elapsed = time.monotonic() - t0
    assert status == 1 and elapsed < 7, (status, elapsed)  # the 5 s floor, not the 8 s read
    assert err.strip().splitlines() == [
        f"tilemark: error: target {disk} did not answer a 4096-byte read of its first block "
        "within 5 s; the storage may have stopped answering."
    ]


def test_sigterm_ends_a_run_on_a_device_that_stopped_answering(tmp_path):
    """Reads take 8 s and no IO timeout is set: SIGTERM still ends the run within a few
    seconds (it used to take SIGKILL, which loses data), and the run is stored. 8 s: the
    run's read must outlast the second before SIGTERM and the engine's 5 s of patience after
    it, with room to spare; every second more is paid twice (the marker check's read before
    the run, the fixture's unmount after it)."""
    import json
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    exe = Path(sys.executable).with_name("tilemark")
    with failing_storage(tmp_path / "mnt", "16M", "rdelay=8", nbd_filter="delay") as disk:
        proc = subprocess.Popen(
            [str(exe), "run", "--target", str(disk), "--rw", "randread", "--duration", "60",
             "--io-timeout", "0", "--results", str(tmp_path / "r")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        runs = tmp_path / "r"
        deadline = time.monotonic() + 25  # the marker check's own read waits 8 s first
        while not (runs.exists() and any(runs.glob("*/run.json"))):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        time.sleep(1)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
        stopped_in = time.monotonic() - t0
    assert proc.returncode == 143, proc.stderr.read()
    assert stopped_in < 8, stopped_in
    # The read still outstanding when the engine gave up waiting for it is named: the run is
    # stored as hung, with the exit status of the signal that ended it.
    (run_json,) = runs.glob("*/run.json")
    stored = json.loads(run_json.read_text())
    assert stored["status"] == "hung" and "never completed" in stored["error"]


def test_a_failed_io_quotes_what_the_kernel_logged_about_the_device(tmp_path, capsys):
    """A loop device over failing storage: the kernel logs each failed request ("I/O error,
    dev loopN, sector S op 0x0:(READ)"); the run's error quotes the first of those it logged
    while the run ran, and run.json keeps them (summary.telemetry.kernel)."""
    import json
    from pathlib import Path

    trigger = tmp_path / "inject"
    args = ("error-pread=EIO", "error-pread-rate=5%", f"error-file={trigger}")
    with failing_storage(tmp_path / "mnt", "32M", *args) as disk, loop_over(disk) as loop:
        _errors_once_running(trigger, tmp_path / "r")
        status, out, err = _cli(
            capsys, "run", "--target", loop, "--destroy-data", loop, "--rw", "randread",
            "--qd", "4", "--duration", "5", "--json", "--results", str(tmp_path / "r"),
        )  # fmt: skip
    assert status == 1, err
    doc = json.loads(out)
    stored = json.loads((Path(doc["run_dir"]) / "run.json").read_text())
    assert stored["status"] == "errors"
    name = Path(loop).name
    kernel = stored["summary"]["telemetry"]["kernel"]
    assert kernel["count"] >= 1
    assert all(name in m["message"] for m in kernel["messages"]), kernel
    assert any(f"I/O error, dev {name}," in m["message"] for m in kernel["messages"]), kernel
    assert "the kernel logged" in stored["error"] and f"dev {name}," in stored["error"]
    assert f"kernel: I/O error, dev {name}," in err and "Traceback" not in err
    # the report lists them
    report = tmp_path / "report.html"
    assert _cli(capsys, "report", doc["run_id"], "--results", str(tmp_path / "r"),
                "-o", str(report))[0] == 0  # fmt: skip
    assert f"I/O error, dev {name}," in report.read_text()
