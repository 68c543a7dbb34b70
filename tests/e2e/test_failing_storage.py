"""IO errors during a run are counted per stream by errno, and the run still ends on time."""

from __future__ import annotations

import time

from .engine_helpers import MiB, plan, run, stream
from .rigs import failing_storage


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

    args = ("error-pread=EIO", "error-pread-rate=10%")
    with failing_storage(tmp_path / "mnt", "32M", *args) as disk:
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
